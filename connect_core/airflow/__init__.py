"""The Airflow layer's logic: the task operator and the DAG factory.

Imported only from `dags/` and `plugins/` (and tests): the rest of
connect_core never imports Airflow, so it runs inside a Spark driver without it.
"""
