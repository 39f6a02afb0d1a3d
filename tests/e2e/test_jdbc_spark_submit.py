"""MariaDB → topic → PostgreSQL through the CLI and real spark-submit (JDBC jars via spark.jars),
with the sink killed (SIGKILL) after writing the target and before its commit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.connectors.jdbc_helpers import Database, mariadb, target  # noqa: F401  (fixtures)
from tests.e2e.test_spark_submit import Cli, cli  # noqa: F401  (fixture)

pytestmark = pytest.mark.spark_submit


def test_sink_killed_after_writing_reruns_without_duplicates(
    cli: Cli,  # noqa: F811
    mariadb: Database,  # noqa: F811
    target: Database,  # noqa: F811
    tmp_path: Path,
) -> None:
    mariadb.execute(
        "CREATE TABLE events (id BIGINT AUTO_INCREMENT PRIMARY KEY, kind VARCHAR(20), payload TEXT)",
        "INSERT INTO events (kind, payload) SELECT CONCAT('k', seq MOD 7), REPEAT('x', seq MOD 50) FROM seq_1_to_5000",
    )
    (tmp_path / "src.json").write_text(
        json.dumps(
            mariadb.source_config(
                **{
                    "mode": "incrementing",
                    "incrementing.column.name": "id",
                    "table.whitelist": "events",
                    "topic.prefix": "",
                }
            )
        )
    )
    # insert.mode insert without any key: only the offsets kept in the target make a rerun safe.
    sink = {"connector.class": "JdbcSinkConnector", "connection.url": target.jdbc_url, "topics": "events"}
    (tmp_path / "sink.json").write_text(json.dumps({**sink, "auto.create": True}))
    cli("create", "src", "--config", "src.json")
    cli("create", "sink", "--config", "sink.json")
    assert cli.run("src")["rows"] == 5000

    killed = cli("run", "sink", check=False, CONNECT_FAULT="before_commit")
    assert killed.returncode != 0, killed.stdout
    assert target.rows("SELECT count(*) FROM events") == [(5000,)], killed.stdout + killed.stderr[-3000:]
    assert target.rows("SELECT count(*) FROM events") == [(5000,)]  # written, not committed in Connect

    rerun = cli.run("sink")
    assert rerun["state"] == "SUCCEEDED"
    assert target.rows("SELECT count(*), count(DISTINCT id) FROM events") == [(5000, 5000)]

    mariadb.execute("INSERT INTO events (kind, payload) VALUES ('late', 'é😀')")
    assert cli.run("src")["rows"] == 1
    assert cli.run("sink")["state"] == "SUCCEEDED"
    source = mariadb.rows("SELECT id, kind, payload FROM events ORDER BY id")
    assert target.rows("SELECT id, kind, payload FROM events ORDER BY id") == [tuple(r) for r in source]
