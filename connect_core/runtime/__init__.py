"""The runtime: everything between a connector plugin and its Spark runs.

Rooms, by concept:

- `store/`: the metadata schema (models, engine, migrations, connector configs, change feed)
- `topics/`: the topic store (topics, partitions, segments) and reading/writing segment files
- `execution/`: one run of a task: the runner, spark-submit, leases and commits, the pre-check
- `cluster/`: Spark pools, their liveness, allocation strategies and the rebalance
- `security/`: secrets masking, config providers, path confinement

Beside them: `context.Runtime` (what REST, the CLI and Airflow open), `settings`,
`plugins` (the plugin registry), `validation` and `airflow_client` (Airflow's REST API).

Imports no Airflow: it runs inside a Spark driver.
"""
