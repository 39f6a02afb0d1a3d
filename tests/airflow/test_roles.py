"""Connect's roles inside Airflow follow what Airflow's own auth manager lets a user do."""

from __future__ import annotations

import pytest
from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager
from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

from connect_core.airflow.roles import role_of
from connect_core.runtime.security.roles import Role


@pytest.mark.parametrize(
    ("airflow_role", "connect_role"),
    [("admin", Role.operator), ("op", Role.operator), ("user", Role.connector), ("viewer", Role.viewer)],
)
def test_simple_auth_managers_roles_map_onto_connects(airflow_role: str, connect_role: Role) -> None:
    user = SimpleAuthManagerUser(username=f"u-{airflow_role}", role=airflow_role)
    assert role_of(user, SimpleAuthManager()) is connect_role


def test_a_user_without_a_role_has_no_access() -> None:
    assert role_of(SimpleAuthManagerUser(username="nobody", role=None), SimpleAuthManager()) is None
