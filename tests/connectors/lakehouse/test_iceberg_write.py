"""The Iceberg commit of a batch (`iceberg._write`) on real tables of a SQL catalog: both ways of
deleting a batch's keys (pyiceberg's `In` filter, the Arrow join for large batches) leave the same
rows, touch only the files that may hold the keys, and carry the offsets in every snapshot."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from connect_core.connectors.lakehouse.iceberg import _write
from tests.connectors.jdbc_helpers import Database, target  # noqa: F401  (fixtures)
from tests.connectors.lakehouse.iceberg_helpers import Lake


def _batch(ids: range, region: str, tag: str) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "region": pa.array([region] * len(ids), pa.string()),
            "tag": pa.array([f"{tag}{i}" for i in ids], pa.string()),
        }
    )


@pytest.mark.parametrize("arrow_delete_keys", [0, 1_000_000], ids=["arrow-join", "pyiceberg-filter"])
@pytest.mark.parametrize("key", [("id",), ("id", "region")], ids=["one-column", "composite"])
def test_a_batch_replaces_its_keys_rows_in_the_files_that_hold_them(
    target: Database,  # noqa: F811
    tmp_path: Path,
    arrow_delete_keys: int,
    key: tuple[str, ...],
) -> None:
    lake = Lake(target, tmp_path / "warehouse")
    catalog = lake.catalog()
    catalog.create_namespace("t")
    table = catalog.create_table("t.rows", schema=_batch(range(0), "", "").schema)
    for start in (0, 100, 200):  # three files, keys 0-99, 100-199, 200-299
        _write.commit(table, _batch(range(start, start + 100), "eu", "v"), None, {"connect.offsets.x": "{}"})
        table = catalog.load_table("t.rows")
    files_before = set(lake.data_files("t.rows"))

    changed = _batch(range(150, 160), "eu", "new")  # keys of the second file only
    keys = pa.table({"id": pa.array([*range(150, 160), 170, 171]), "region": ["eu"] * 12})  # 170, 171: deleted
    _write.commit(table, changed, keys.select(list(key)), {"connect.offsets.x": '{"t":{"0":9}}'}, arrow_delete_keys)

    expected = sorted(
        [(i, "eu", "v" + str(i)) for i in range(300) if not 150 <= i < 160 and i not in (170, 171)]
        + [(i, "eu", "new" + str(i)) for i in range(150, 160)]
    )
    assert lake.scan("t.rows", ("id", "region", "tag")) == expected == lake.parquet("t.rows", ("id", "region", "tag"))
    files_after = set(lake.data_files("t.rows"))
    assert len(files_before - files_after) == 1  # only the file of keys 100-199 was rewritten
    table = catalog.load_table("t.rows")
    snapshot = table.current_snapshot()
    parent = table.snapshot_by_id(snapshot.parent_snapshot_id)
    assert snapshot.summary["connect.offsets.x"] == parent.summary["connect.offsets.x"] == '{"t":{"0":9}}'


@pytest.mark.parametrize("kind", ["sql", "rest"])
def test_a_catalog_that_never_answers_is_a_retriable_error_in_bounded_time(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A catalog server that accepts connections and never answers: the run (and an offset reset,
    which loads the same catalog) gives up after the connect timeout instead of hanging for ever."""
    import socket
    import threading
    import time

    from connect_core.connectors.lakehouse.iceberg import _catalog
    from connect_core.connectors.lakehouse.iceberg.config import IcebergSinkConfig
    from connect_core.sdk.errors import RetriableError

    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.extend(iter(lambda: server.accept()[0], None)), daemon=True).start()
    port = server.getsockname()[1]
    monkeypatch.setattr(_catalog, "CONNECT_TIMEOUT_S", 1)
    monkeypatch.setattr(_catalog, "REQUEST_TIMEOUT_S", 2)
    uri = f"postgresql://u@127.0.0.1:{port}/cat" if kind == "sql" else f"http://127.0.0.1:{port}"
    cfg = IcebergSinkConfig.model_validate(
        {
            "connector.class": "IcebergSinkConnector",
            "topics": "t",
            "iceberg.tables": "db.t",
            "iceberg.catalog.type": kind,
            "iceberg.catalog.uri": uri,
            "iceberg.catalog.warehouse": str(tmp_path),
        }
    )
    started = time.monotonic()
    with pytest.raises(RetriableError, match="did not answer"):
        _catalog.load_catalog(cfg)
    assert time.monotonic() - started < 20
    assert accepted  # it did reach the silent server
    server.close()


@pytest.mark.parametrize("how", ["files", "rows"])
def test_a_commit_built_on_a_snapshot_another_commit_replaced_is_refused_not_replayed_on_top(
    target: Database,  # noqa: F811
    tmp_path: Path,
    how: str,
) -> None:
    """A run that lost its lease (a zombie) commits after the run that replaced it: its rows and the
    offsets it read are stale. pyiceberg 0.12 retried such a commit on the new head, so the same
    records landed twice and the offsets went back; it must fail, and the run read the table anew."""
    from connect_core.sdk.errors import RetriableError

    lake = Lake(target, tmp_path / "warehouse")
    catalog = lake.catalog()
    catalog.create_namespace("t")
    table = catalog.create_table("t.rows", schema=_batch(range(0), "", "").schema)
    _write.commit(table, _batch(range(0, 10), "eu", "v"), None, {"connect.offsets.x": '{"t":{"0":10}}'})
    zombie, current = catalog.load_table("t.rows"), catalog.load_table("t.rows")
    _write.commit(current, _batch(range(10, 20), "eu", "v"), None, {"connect.offsets.x": '{"t":{"0":20}}'})

    with pytest.raises(RetriableError, match="changed under this commit"):
        if how == "files":
            from pyiceberg.io.pyarrow import _dataframe_to_data_files

            # the rows as the workers write them
            written = list(_dataframe_to_data_files(zombie.metadata, _batch(range(10, 20), "eu", "v"), zombie.io))
            _write.commit_files(zombie, written, {"connect.offsets.x": '{"t":{"0":20}}'})
        else:
            _write.commit(zombie, _batch(range(10, 20), "eu", "v"), None, {"connect.offsets.x": '{"t":{"0":20}}'})

    assert [r[0] for r in lake.scan("t.rows", ("id",))] == list(range(20))  # each row once
    assert lake.offsets("t.rows", "x") == '{"t":{"0":20}}'
