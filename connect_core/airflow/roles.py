"""The Connect role of an Airflow user, from the permissions Airflow's auth manager gives them.

Connect's roles (`connect_core.runtime.security.roles`) follow what a user may do in Airflow
itself, so one place (Airflow's auth manager: Simple, FAB, Keycloak …) decides both:

* may edit Airflow's pools → `operator` (Connect's Spark pools, topics, offsets resets, the rebalance);
* may edit DAGs → `connector` (a connector is a DAG: create, change, pause, run it);
* may read DAGs → `viewer`; anything less → 403.

With Airflow's Simple auth manager that is: admin and op → operator, user → connector, viewer → viewer.
"""

from __future__ import annotations

from typing import Annotated, Any

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.core_api.security import get_user
from fastapi import Depends, HTTPException, Request

from connect_core.runtime.security.roles import Role

__all__ = ["airflow_role", "role_of"]


def role_of(user: Any, manager: Any = None) -> Role | None:
    """The user's Connect role by the auth manager's answers (this api-server's own by default); None: no access."""
    manager = manager or get_auth_manager()
    if manager.is_authorized_pool(method="PUT", user=user):
        return Role.operator
    if manager.is_authorized_dag(method="PUT", user=user):
        return Role.connector
    if manager.is_authorized_dag(method="GET", user=user):
        return Role.viewer
    return None


async def airflow_role(request: Request, user: Annotated[Any, Depends(get_user)]) -> None:
    """Auth of Connect's apps inside Airflow: Airflow's own login, then the user's Connect role."""
    role = role_of(user)
    if role is None:
        raise HTTPException(status_code=403, detail="this Airflow user may not read DAGs, so not connectors either")
    request.state.connect_role = role
