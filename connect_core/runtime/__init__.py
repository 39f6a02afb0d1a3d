"""The runtime: metadata store, topic store, plugins, validation and the task runner.

Imports no Airflow: it runs inside a Spark driver.
"""
