"""The Airflow plugin of Connect: the Connect view in the UI.

Thin on purpose: the view is `connect_core.web.view`; the task operator the
DAGs use is `connect_core.airflow.operator.ConnectTaskOperator`. The view app reads the metadata store named
by CONNECT_DATABASE_URL in the api-server's environment.
"""

from airflow.plugins_manager import AirflowPlugin

from connect_core.runtime.context import Runtime
from connect_core.web.view import create_view_app


class ConnectPlugin(AirflowPlugin):
    name = "connect"
    fastapi_apps = [
        {
            "app": create_view_app(lambda: Runtime.open(upgrade=False)),
            "url_prefix": "/connect-ui",
            "name": "Connect view",
        }
    ]
    external_views = [
        {"name": "Connect", "href": "/connect-ui/", "url_route": "connect", "destination": "nav", "category": "browse"}
    ]
