"""HTTP faces of the runtime (FastAPI): the Connect view shown inside the Airflow UI."""
