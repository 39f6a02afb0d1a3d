"""Every registered Connect connector, compiled to an Airflow DAG `connect__<name>`: file 0.

The DAGs are spread over `CONNECT_AIRFLOW_DAG_SHARDS` files: this one (which also has the
rebalance DAG) and `connect_dags_01.py` … `connect_dags_31.py`. Each connector's DAG is in the
file its DAG id hashes to; a file at or beyond the count defines none. The logic lives in
`connect_core.airflow.dag_factory`; these files only hand Airflow the DAGs. They read the
metadata store named by CONNECT_DATABASE_URL.
"""

from connect_core.airflow.dag_factory import build_dags

globals().update(build_dags(shard=0))
