"""Every registered Connect connector, compiled to an Airflow DAG `connect__<name>`.

The logic lives in `connect_core.airflow.dag_factory`; this file only hands
Airflow the DAGs. It reads the metadata store named by CONNECT_DATABASE_URL.
"""

from connect_core.airflow.dag_factory import build_dags

globals().update(build_dags())
