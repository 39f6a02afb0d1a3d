"""The topics' schema histories over Confluent Schema Registry's read API, read by Schema Registry's
own Python client unchanged; hostile subjects and versions; `connect topics schema` on the store and
over REST."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastavro
import httpx
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType
from sqlalchemy.orm import sessionmaker
from typer.testing import CliRunner, Result

from connect_core.cli import app
from connect_core.rest.app import create_app
from connect_core.rest.auth import bearer_or_loopback
from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import TaskRunner
from connect_core.runtime.security.roles import Role
from connect_core.runtime.store.db import make_engine
from connect_core.runtime.topics.schema_history import SchemaHistory
from connect_core.runtime.topics.schemas import TopicSchema
from tests.connectors.jdbc_helpers import Database, postgres, synced  # noqa: F401  (fixtures)
from tests.rest.conftest import Served, serve


@pytest.fixture
def history(runtime: Runtime, runner: TaskRunner, postgres: Database) -> list[int]:  # noqa: F811
    """Topic `items` with two schema versions (a column added by the second run); the runs' ids."""
    postgres.execute(
        "CREATE TABLE items (id bigint PRIMARY KEY, name text, amount numeric(12,2), day date, at timestamptz)",
        "INSERT INTO items VALUES (1, 'a', 1.5, date '2024-01-01', timestamptz '2024-01-01 10:00:00+00')",
    )
    runtime.create_connector(
        "src",
        postgres.source_config(
            **{"mode": "incrementing", "incrementing.column.name": "id", "table.whitelist": "items", "topic.prefix": ""}
        ),
    )
    first = synced(runner, "src")[0].run_id
    postgres.execute(
        "ALTER TABLE items ADD COLUMN note text", "INSERT INTO items (id, name, note) VALUES (2, 'b', 'n')"
    )
    second = synced(runner, "src")[0].run_id
    assert first is not None and second is not None
    return [first, second]


@pytest.fixture
def registry(api: Served) -> Iterator[SchemaRegistryClient]:
    yield SchemaRegistryClient({"url": api.url})


def test_schema_registrys_client_reads_the_history_unchanged(
    registry: SchemaRegistryClient, history: list[int], api: Served
) -> None:
    assert registry.get_subjects() == ["items-value"]
    assert registry.get_versions("items-value") == [1, 2]

    latest = registry.get_latest_version("items-value")
    assert (latest.subject, latest.version) == ("items-value", 2)
    assert latest.schema.schema_type == "AVRO"
    avro = json.loads(latest.schema.schema_str)
    fastavro.parse_schema(avro)
    assert (avro["type"], avro["name"], avro["namespace"]) == ("record", "items", "connect")
    fields = {f["name"]: f for f in avro["fields"]}
    assert list(fields) == ["id", "name", "amount", "day", "at", "note"]
    assert fields["id"]["type"] == ["null", "long"] and fields["id"]["default"] is None
    assert fields["amount"]["type"][1] == {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}
    assert fields["day"]["type"][1] == {"type": "int", "logicalType": "date"}
    assert fields["at"]["type"][1] == {"type": "long", "logicalType": "timestamp-micros"}
    assert avro["connect.key"] == ["id"]
    properties = latest.schema.metadata.properties.properties  # type: ignore[union-attr]
    assert properties["connect.run.id"] == str(history[1]) and properties["connect.connector"] == "src"

    first = registry.get_version("items-value", 1)
    assert first.version == 1 and "note" not in first.schema.schema_str
    assert first.schema_id != latest.schema_id
    by_id = registry.get_schema(first.schema_id)
    assert by_id.schema_str == first.schema.schema_str
    bare = httpx.get(f"{api.url}/subjects/items-value/versions/latest/schema")
    assert bare.status_code == 200 and bare.json() == avro

    for call, code in (
        (lambda: registry.get_versions("nope-value"), 40401),
        (lambda: registry.get_version("nope-value", 1), 40401),
        (lambda: registry.get_version("items-value", 7), 40402),
        (lambda: registry.get_schema(987654), 40403),
        (lambda: registry.get_latest_version("items-key"), 40401),  # only value subjects
    ):
        with pytest.raises(SchemaRegistryError) as raised:
            call()
        assert raised.value.error_code == code
        assert raised.value.http_status_code == 404


def _answer(api: Served, path: str) -> httpx.Response:
    response = httpx.get(f"{api.url}{path}")
    assert response.status_code < 500, (path[:80], response.text)
    assert "Traceback" not in response.text and "SELECT" not in response.text
    return response


def test_hostile_subjects_and_versions_are_4xx(api: Served, history: list[int]) -> None:
    long = "x" * 10_000
    for subject in (
        "a/b-value",
        "a%2Fb-value",
        "%2F",
        "ünïcødé-value",
        "😀-value",
        long,
        long + "-value",
        "-value",
        "..-value",
        "items-value%00",
        "items-value%20",
        "items",
        "ITEMS-value",
    ):
        for path in (
            f"/subjects/{subject}/versions",
            f"/subjects/{subject}/versions/1",
            f"/subjects/{subject}/versions/latest/schema",
        ):
            response = _answer(api, path)
            assert response.status_code in (400, 404), (subject[:40], path[-20:], response.text)
            assert len(response.text) < 2_000  # the subject is echoed cut
    for version in (
        "0",
        "99999999999999999999",
        "latest%20",
        "%20latest",
        "1.0",
        "+1",
        "1e3",
        "٣",
        "-2",
        "0x1",
        "2147483648",
        "x" * 10_000,
    ):
        response = _answer(api, f"/subjects/items-value/versions/{version}")
        assert response.status_code == 422 and response.json()["error_code"] == 42202, (version[:30], response.text)
        assert (
            _answer(api, f"/subjects/nope-value/versions/{version}").status_code == 422
        )  # checked first, as Confluent
    assert _answer(api, "/subjects/items-value/versions/-1").json()["version"] == 2  # Confluent's -1: the latest
    assert _answer(api, "/subjects/items-value/versions/2147483647").json()["error_code"] == 40402
    for schema_id in ("0", "-1", "abc", "99999999999999999999999", "1%00", "x" * 10_000):
        response = _answer(api, f"/schemas/ids/{schema_id}")
        assert response.status_code in (400, 404)
    assert _answer(api, "/subjects?offset=-5").status_code == 400
    assert _answer(api, "/subjects?limit=abc").status_code == 400
    assert _answer(api, "/subjects?subjectPrefix=ite&limit=1").json() == ["items-value"]
    assert _answer(api, "/subjects?subjectPrefix=" + "z" * 301).status_code == 400
    assert _answer(api, "/subjects?deleted_only=true").json() == []
    assert _answer(api, "/subjects/items-value/versions?offset=1").json() == [2]


def _connect(*args: str, env: dict[str, str | None]) -> Result:
    result = CliRunner().invoke(app, list(args), env=env)
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(params=["store", "rest"])
def cli_env(request: pytest.FixtureRequest, database_url: str, tmp_path: Path) -> dict[str, str | None]:
    """The CLI on the test's metadata database, or pointed at the REST API."""
    if request.param == "store":
        return {"CONNECT_DATABASE_URL": database_url, "CONNECT_HOME": str(tmp_path / "home"), "CONNECT_REST_URL": None}
    api: Served = request.getfixturevalue("api")
    return {"CONNECT_REST_URL": api.url, "CONNECT_REST_TOKEN": None, "CONNECT_DATABASE_URL": None}


def test_cli_shows_a_version_as_a_table_and_the_diff_of_two(cli_env: dict[str, str | None], history: list[int]) -> None:
    table = _connect("topics", "schema", "items", env=cli_env).stdout
    assert "items: version 2 (id" in table and f"run {history[1]} of `src`" in table
    rows = [line.split("│") for line in table.splitlines() if "│" in line]
    cells = [[c.strip() for c in row[1:-1]] for row in rows]
    assert ["1", "id", "bigint", "yes", "key"] in cells and ["6", "note", "string", "yes", ""] in cells
    assert ["3", "amount", "decimal(12,2)", "yes", ""] in cells

    first = json.loads(_connect("topics", "schema", "items", "--version", "1", "-o", "json", env=cli_env).stdout)
    assert (first["version"], first["run_id"], first["connector"]) == (1, history[0], "src")
    assert [c["name"] for c in first["schema"]["columns"]] == ["id", "name", "amount", "day", "at"]
    assert first["schema"]["key"] == ["id"] and len(first["fingerprint"]) == 64

    diff = _connect("topics", "schema", "items", "--diff", "1", "2", env=cli_env).stdout
    assert "version 1 → 2" in diff and "+ added      note string (nullable)" in diff
    assert "no changes" in _connect("topics", "schema", "items", "--diff", "2", "2", env=cli_env).stdout
    changes: dict[str, Any] = json.loads(
        _connect("topics", "schema", "items", "--diff", "2", "1", "-o", "json", env=cli_env).stdout
    )
    assert [c["name"] for c in changes["dropped"]] == ["note"] and changes["added"] == [] and changes["key"] is None

    missing = CliRunner().invoke(app, ["topics", "schema", "items", "--version", "9"], env=cli_env)
    assert missing.exit_code != 0 and "9" in missing.output
    unknown = CliRunner().invoke(app, ["topics", "schema", "nope"], env=cli_env)
    assert unknown.exit_code != 0 and "nope" in unknown.output
    for bad in (["--version", "0"], ["--diff", "0", "1"], ["--diff", "1"]):
        assert CliRunner().invoke(app, ["topics", "schema", "items", *bad], env=cli_env).exit_code == 2


def _record(runtime: Runtime, topic: str, *columns: StructField) -> None:
    """A version of `topic`'s schema as a run's commit records it (no Spark job needed)."""
    runtime.topics.ensure_topic(topic)
    with sessionmaker(runtime.engine).begin() as s:
        SchemaHistory.record(s, [(topic, TopicSchema.of(StructType(list(columns))))], 1, "src")


@pytest.fixture
def recorded(runtime: Runtime) -> None:
    """Topic `items` with versions 1 (id) and 2 (id, name)."""
    _record(runtime, "items", StructField("id", LongType()))
    _record(runtime, "items", StructField("id", LongType()), StructField("name", StringType()))


def test_the_clients_other_calls_answer_as_a_read_only_registry_with_compatibility_none(
    registry: SchemaRegistryClient, recorded: None, api: Served
) -> None:
    """Lookups, compatibility, config and mode were 404 `Not Found` (a lookup said so of a subject
    that exists); register and delete were a bare 405. Now: what Schema Registry answers in
    READONLY mode with compatibility NONE."""
    first = httpx.get(f"{api.url}/subjects/items-value/versions/1/schema").text
    found = registry.lookup_schema("items-value", Schema(first, "AVRO"))
    assert (found.version, found.subject) == (1, "items-value")
    other = json.dumps({"type": "record", "name": "other", "fields": [{"name": "x", "type": "long"}]})
    refused = [
        (lambda: registry.lookup_schema("items-value", Schema(other, "AVRO")), 404, 40403),
        (lambda: registry.lookup_schema("nope-value", Schema(first, "AVRO")), 404, 40401),
        (lambda: registry.test_compatibility("items-value", Schema("{not json", "AVRO")), 422, 42201),
        (lambda: registry.test_compatibility("items-value", Schema(other, "AVRO"), version=9), 404, 40402),
        (lambda: registry.get_compatibility("nope-value"), 404, 40401),
        (lambda: registry.register_schema("items-value", Schema(other, "AVRO")), 422, 42205),
        (lambda: registry.delete_subject("items-value", permanent=True), 422, 42205),
        (lambda: registry.delete_version("items-value", 1), 422, 42205),
        (lambda: registry.set_compatibility("items-value", "BACKWARD"), 422, 42205),
        (lambda: registry.set_compatibility(level="BACKWARD"), 422, 42205),
        (lambda: registry.update_mode("items-value", "READWRITE"), 422, 42205),
        (lambda: registry.update_global_mode("READWRITE"), 422, 42205),
    ]
    for call, status, code in refused:
        with pytest.raises(SchemaRegistryError) as raised:
            call()
        assert (raised.value.http_status_code, raised.value.error_code) == (status, code), raised.value
    assert "read-only mode" in str(raised.value) and "commits" in str(raised.value)
    assert registry.get_compatibility("items-value") == registry.get_compatibility() == "NONE"
    assert registry.test_compatibility("items-value", Schema(other, "AVRO")) is True
    assert registry.test_compatibility_all_versions("items-value", Schema(other, "AVRO")) is True
    assert registry.get_mode("items-value") == registry.get_global_mode() == "READONLY"
    assert registry.get_versions("items-value") == [1, 2]  # nothing was deleted
    assert _answer(api, "/subjects?deletedOnly=true").json() == []  # Schema Registry's own spelling
    assert _answer(api, "/subjects/items-value/versions?deletedOnly=true").json() == []
    deep = httpx.post(f"{api.url}/subjects/items-value", json={"schema": "[" * 50_000 + "]" * 50_000})
    assert deep.status_code == 422 and deep.json()["error_code"] == 42201


_SUBJECT_READS = [
    ("GET", "/subjects"),
    ("GET", "/subjects/items-value/versions"),
    ("GET", "/subjects/items-value/versions/1"),
    ("GET", "/subjects/items-value/versions/latest/schema"),
    ("GET", "/schemas/ids/1"),
    ("POST", "/subjects/items-value"),
    ("POST", "/compatibility/subjects/items-value/versions/latest"),
    ("GET", "/config/items-value"),
    ("GET", "/mode/items-value"),
]


def test_every_subjects_route_needs_a_token(runtime: Runtime, recorded: None) -> None:
    tokens = {Role.operator: "op-token-1", Role.viewer: "view-token-3"}
    body = {"schema": '"long"'}
    for served in serve(create_app(lambda: runtime, auth=[bearer_or_loopback(tokens=tokens)])):
        for method, path in [*_SUBJECT_READS, ("POST", "/subjects/items-value/versions"), ("DELETE", "/subjects/x")]:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "view-token-3"}):
                denied = httpx.request(method, served.url + path, json=body, headers=headers)
                assert denied.status_code == 401, (method, path, headers, denied.text)
            viewer = httpx.request(
                method, served.url + path, json=body, headers={"Authorization": "Bearer view-token-3"}
            )
            assert viewer.status_code in (200, 404, 422), (method, path, viewer.text)
            assert "items" not in denied.text


def test_the_subjects_routes_answer_503_when_the_store_is_gone(runtime: Runtime, api: Served) -> None:
    """A store that refuses connections (and one that never answers, by libpq's connect timeout):
    503 with Retry-After, a message naming the store, no driver text; never a 500 or a hang."""
    with socket.socket() as blackhole:
        blackhole.bind(("127.0.0.1", 0))
        blackhole.listen(8)
        # every route on a refusing store; one on a silent store (each waits out the connect timeout)
        for port, routes in ((1, _SUBJECT_READS), (blackhole.getsockname()[1], _SUBJECT_READS[-4:-3])):
            runtime.topics.schemas = SchemaHistory(
                make_engine(f"postgresql://u@127.0.0.1:{port}/db", connect_timeout=1)
            )
            for method, path in routes:
                started = time.monotonic()
                answer = httpx.request(method, api.url + path, json={"schema": '"long"'}, timeout=30)
                assert answer.status_code == 503 and int(answer.headers["retry-after"]) > 0, (path, answer.text)
                assert "metadata store" in answer.json()["message"] and "psycopg2" not in answer.text
                assert time.monotonic() - started < 5, path


def test_cli_shows_names_from_the_records_as_text_and_refuses_an_invalid_topic(
    runtime: Runtime, database_url: str, tmp_path: Path
) -> None:
    """A column named with an escape sequence (a source table's, a JSON key's) went to the
    operator's terminal as is; a topic name with a NUL crashed the CLI with a ValueError."""
    _record(runtime, "items", StructField("\x1b]52;c;ZXZpbA==\x07x", StringType()), StructField("a\nb", LongType()))
    _record(runtime, "items", StructField("[red]y[/red]\x1b[2J", ArrayType(StringType())))
    env: dict[str, str | None] = {
        "CONNECT_DATABASE_URL": database_url,
        "CONNECT_HOME": str(tmp_path / "home"),
        "CONNECT_REST_URL": None,
    }
    shown = _connect("topics", "schema", "items", "--version", "1", env=env).stdout
    shown += _connect("topics", "schema", "items", "--diff", "1", "2", env=env).stdout
    assert "\x1b" not in shown and "\x07" not in shown
    assert "\\x1b]52;c;ZXZpbA==\\x07x" in shown and "a\\nb" in shown and "[red]y[/red]\\x1b[2J" in shown
    for bad in ("a\x00b", "../etc"):
        refused = CliRunner().invoke(app, ["topics", "schema", bad], env=env)
        assert refused.exit_code == 2 and "invalid topic name" in refused.output, refused.output
        assert refused.exception is None or isinstance(refused.exception, SystemExit)
    too_big = CliRunner().invoke(app, ["topics", "schema", "items", "--version", str(2**31)], env=env)
    assert too_big.exit_code == 2
