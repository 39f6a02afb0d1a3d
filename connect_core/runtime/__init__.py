"""The runtime: everything between a connector plugin and its Spark runs.

Rooms, by concept:

- `store/`: the metadata schema (models, engine, migrations, connector configs, change feed)
- `topics/`: the topic store (topics, partitions, segments) and reading/writing segment files
- `execution/`: one run of a task: the runner, spark-submit, leases and commits, the pre-check;
  a warm pool's worker and its lifecycle (`warm_pool`)
- `cluster/`: Spark pools, their liveness, allocation strategies and the rebalance
- `spark/`: Spark itself (install, conf merging and secret splitting, sessions, Spark Connect, the
  JVM archive); the bottom of the runtime
- `security/`: secrets masking, config providers, path confinement

Beside them: `context.Runtime` (what REST, the CLI and Airflow open), `settings`,
`plugins` (the plugin registry), `validation` and `airflow_client` (Airflow's REST API).

Imports no Airflow: it runs inside a Spark driver.
"""
