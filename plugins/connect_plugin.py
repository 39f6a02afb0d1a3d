"""The Airflow plugin of Connect: the REST API under `/connect`, the Connect view in the UI, and a
middleware that makes pausing a connector's DAG pause the connector (and unpausing resume it).

Thin on purpose: the apps are `connect_core.rest.app` and `connect_core.web.view`, the middleware
`connect_core.airflow.pause_sync`.
Airflow does not protect a plugin's FastAPI apps by itself, so both require
Airflow's own authentication (a bearer token from `/auth/token`, or the UI's
session cookie), and give each user the Connect role their Airflow permissions say
(`connect_core.airflow.roles`). They read the metadata store named by CONNECT_DATABASE_URL.
"""

from airflow.plugins_manager import AirflowPlugin

from connect_core.airflow.pause_sync import DagPauseMirror
from connect_core.airflow.roles import airflow_role
from connect_core.rest.app import create_app
from connect_core.rest.edge import EdgePolicy
from connect_core.runtime.context import Runtime
from connect_core.runtime.settings import Settings
from connect_core.web.view import create_view_app


def _runtime() -> Runtime:
    return Runtime.open(upgrade=False)


class ConnectPlugin(AirflowPlugin):
    name = "connect"
    fastapi_apps = [
        {
            # Airflow's api-server decides which Host names it answers to; the edge keeps its size,
            # shape and cross-site checks.
            "app": create_app(_runtime, auth=[airflow_role], edge=EdgePolicy.from_settings(Settings(), bound_to=None)),
            "url_prefix": "/connect",
            "name": "Connect REST API",
        },
        {"app": create_view_app(_runtime, auth=[airflow_role]), "url_prefix": "/connect-ui", "name": "Connect view"},
    ]
    fastapi_root_middlewares = [
        {
            "middleware": DagPauseMirror,
            "args": [],
            "kwargs": {},
            "name": "Connect: a DAG's pause follows to its connector",
        }
    ]
    external_views = [
        {"name": "Connect", "href": "/connect-ui/", "url_route": "connect", "destination": "nav", "category": "browse"}
    ]
