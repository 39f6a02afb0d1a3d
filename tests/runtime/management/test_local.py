"""The management room on the store (`LocalManagement`): what its REST and CLI callers rely on
beyond the answers the REST tests check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from connect_core.runtime.context import Runtime
from connect_core.runtime.management import LocalManagement, NotStoppedError


def _source(tmp_path: Path, **extra: object) -> dict[str, Any]:
    return {"connector.class": "FileSourceConnector", "file": str(tmp_path / "in.txt"), "topic": "t", **extra}


def test_the_local_room_tells_of_its_connector_writes_only(runtime: Runtime, tmp_path: Path) -> None:
    """The REST API's cache is dropped on every connector write: reads must not drop it."""
    writes: list[int] = []
    room = LocalManagement(runtime, on_write=lambda: writes.append(1))
    room.create("src", _source(tmp_path))
    assert len(writes) == 1
    for read in (room.status, room.info, room.config, room.tasks, room.offsets, room.topics):
        read("src")
    room.expanded(["info", "status"])
    assert len(writes) == 1
    assert room.apply("src", _source(tmp_path), dry_run=True)["action"] == "unchanged"
    assert room.apply("src", _source(tmp_path))["action"] == "unchanged"
    assert len(writes) == 1  # an unchanged apply writes nothing
    room.patch_config("src", {"topic": "t2"})
    room.set_state("src", "PAUSED")
    room.restart("src", include_tasks=True)
    room.delete("src")
    assert len(writes) == 5


def test_offsets_change_only_while_stopped(runtime: Runtime, tmp_path: Path) -> None:
    room = LocalManagement(runtime)
    room.create("src", _source(tmp_path))
    offsets = [{"partition": {"file": "in.txt"}, "offset": {"position": 3}}]
    with pytest.raises(NotStoppedError, match="STOPPED"):
        room.alter_offsets("src", offsets)
    room.set_state("src", "STOPPED")
    assert "altered" in room.alter_offsets("src", offsets)["message"]
    assert room.offsets("src") == {"offsets": offsets}
    room.reset_offsets("src")
    assert room.offsets("src") == {"offsets": []}
