"""Connect DAGs, file 9 of `CONNECT_AIRFLOW_DAG_SHARDS` (see connect_dags.py)."""

from connect_core.runtime.settings import Settings

SHARD = 9
settings = Settings()
if settings.airflow_dag_shards > SHARD:  # a file beyond the count defines no DAG (and imports no more)
    from connect_core.airflow.dag_factory import build_dags

    globals().update(build_dags(settings, shard=SHARD))
