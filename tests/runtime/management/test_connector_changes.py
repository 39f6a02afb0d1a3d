"""Changing connectors (`ConnectorChanges`): what `apply` (`PUT /connectors/{name}/apply`, `connect
apply`) answers about a config that holds a secret in a key's name."""

from __future__ import annotations

from typing import Any

from connect_core.runtime.context import Runtime
from connect_core.runtime.management import LocalManagement

SALT = "Zq8SaltyS3cretXYZ"


def _jdbc(**extra: Any) -> dict[str, Any]:
    return {
        "connector.class": "JdbcSourceConnector",
        "connection.url": "jdbc:postgresql://127.0.0.1:5432/test",
        "mode": "bulk",
        "table.whitelist": "public.orders",
        "topic.prefix": "pg-",
        **extra,
    }


def test_apply_lists_changed_keys_with_their_salts_masked(runtime: Runtime) -> None:
    room = LocalManagement(runtime)
    hashed = {f"column.mask.hash.SHA-256.with.salt.{SALT}": "public.orders.email"}
    created = room.apply("src", _jdbc(**hashed))
    assert created["action"] == "created" and SALT not in repr(created)
    assert created["changed"] == ["column.mask.hash.SHA-256.with.salt.********", *sorted(_jdbc())]

    # a new salt: the old key goes, the new one comes; both are shown alike, and listed once
    resalted = _jdbc(**{f"column.mask.hash.SHA-256.with.salt.{SALT}2": "public.orders.email", "poll.interval.ms": 1234})
    for dry_run in (True, False):
        planned = room.apply("src", resalted, dry_run=dry_run)
        assert planned["action"] == "updated", planned
        assert planned["changed"] == ["column.mask.hash.SHA-256.with.salt.********", "poll.interval.ms"]
        assert SALT not in repr(planned)
    assert f"column.mask.hash.SHA-256.with.salt.{SALT}2" in runtime.connectors.get("src").config
    assert room.apply("src", resalted)["changed"] == []
