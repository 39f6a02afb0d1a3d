"""Debezium's column mask keys: what they parse to, what they refuse (by key, the salt never shown),
and the same values on the Spark and the Arrow path (a source reads a small window as Arrow, a big
one through Spark: a hash must not depend on which)."""

from __future__ import annotations

import datetime as dt
import hashlib
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from connect_core.connectors._masks import ColumnMasks, masked_batch, masked_frame, parse_masks, shown_key
from connect_core.runtime.plugins import PluginRegistry
from connect_core.runtime.validation import config_infos, validate_connector
from connect_core.sdk.errors import ConfigError

SALT = "CzQMA0cB5K-salt"


def _masks(config: dict[str, Any]) -> ColumnMasks:
    masks, problems = parse_masks(config)
    assert problems == {}
    return masks


def _jdbc(**extra: Any) -> dict[str, Any]:
    return {
        "connector.class": "JdbcSourceConnector",
        "connection.url": "jdbc:postgresql://127.0.0.1:5432/test",
        "table.whitelist": "public.users",
        "topic.prefix": "db.",
        **extra,
    }


def test_the_three_key_families_parse_as_debezium_writes_them() -> None:
    masks = _masks(
        {
            f"column.mask.hash.SHA-256.with.salt.{SALT}": "inventory.customers.email, inventory.customers.phone",
            f"column.mask.hash.v2.md5.with.salt.{SALT}": "inventory.orders.note",
            "column.mask.with.6.chars": r"inventory\.customers\.ssn",
            "column.truncate.to.3.chars": "inventory.customers.zip",
            "column.propagate.source.type": ".*",  # another Debezium key: not ours, left alone
        }
    )
    found = {r.kind: r for r in masks.rules}
    assert found["mask"].chars == 6 and found["truncate"].chars == 3
    hashes = sorted((r.algorithm, r.patterns) for r in masks.rules if r.kind == "hash")
    assert hashes == [
        ("MD5", ("inventory.orders.note",)),
        ("SHA-256", ("inventory.customers.email", "inventory.customers.phone")),
    ]
    # matched whole and ignoring case, as Debezium matches: exact names and regexes alike
    rules = masks.for_columns(["Inventory.Customers"], ["EMAIL", "ssn", "zip", "name"])
    assert {c: r.kind for c, r in rules.items()} == {"EMAIL": "hash", "ssn": "mask", "zip": "truncate"}
    assert masks.for_columns(["inventory.customers_old"], ["email", "ssn"]) == {}
    assert SALT not in repr(masks)  # a rule in an error or a log line never shows its salt


def test_a_column_two_rules_name_gets_the_one_that_reveals_least() -> None:
    masks = _masks(
        {
            "column.truncate.to.2.chars": "db.t.a,db.t.b",
            f"column.mask.hash.SHA-1.with.salt.{SALT}": "db.t.a,db.t.b",
            "column.mask.with.3.chars": "db.t.b",
        }
    )
    rules = masks.for_columns(["db.t"], ["a", "b"])
    assert (rules["a"].kind, rules["b"].kind) == ("hash", "mask")  # Debezium would only truncate both


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        (f"column.mask.hash.SHA3-256.with.salt.{SALT}", "a.b.c", "is not one of MD5, SHA-1"),
        (f"column.mask.hash.SHA-256.with.salt.{SALT}", "", "list the columns"),
        (f"column.mask.hash.SHA-256.with.salt.{SALT}", "a.b.(c", "invalid regex"),
        (f"column.mask.hash.SHA-256.with.salt.{SALT}", r"(a)\1", "linear-time matcher"),
        ("column.mask.hash.SHA-256.with.salt.short", "a.b.c", "at least 8 characters"),
        ("column.mask.hash.SHA-256.with.salt.********", "a.b.c", "masked one a shown config has"),
        ("column.mask.hash.SHA-256", "a.b.c", "column.mask.hash.<algorithm>.with.salt.<salt>"),
        ("column.mask.with.x.chars", "a.b.c", "whole number from 0 to 1024"),
        ("column.mask.with.100000.chars", "a.b.c", "whole number from 0 to 1024"),
        ("column.truncate.to.0.chars", "a.b.c", "whole number from 1"),
        ("column.mask.width.3.chars", "a.b.c", "unknown column mask key"),
    ],
)
def test_a_bad_key_is_a_400_naming_it_with_the_salt_masked(key: str, value: str, says: str) -> None:
    registry = PluginRegistry()
    with pytest.raises(ConfigError) as refused:
        # with another problem: every one is reported at once
        validate_connector("c", _jdbc(**{key: value, "fetch.size": 0}), registry)
    shown = shown_key(key)
    assert "short" not in shown and (shown == key or shown.endswith(".with.salt.********"))
    assert any(says in m for m in refused.value.errors[shown]), refused.value.errors
    assert "fetch.size" in refused.value.errors
    assert SALT not in str(refused.value) and SALT not in repr(refused.value.errors)
    infos = config_infos(_jdbc(**{key: value}), registry)
    assert SALT not in repr(infos)
    assert any(c["value"]["name"] == shown and c["value"]["errors"] for c in infos["configs"])


def test_valid_masks_pass_validation_and_reach_the_task_configs() -> None:
    key = f"column.mask.hash.SHA-256.with.salt.{SALT}"
    validated = validate_connector("c", _jdbc(**{key: "public.users.email"}), PluginRegistry())
    assert validated.task_configs[0][key] == "public.users.email"


def test_a_key_column_may_be_hashed_but_not_masked_or_truncated() -> None:
    masks = _masks({"column.mask.with.3.chars": "db.t.id", f"column.mask.hash.MD5.with.salt.{SALT}": "db.t.k"})
    assert masks.for_columns(["db.t"], ["k"], key=["k"])["k"].kind == "hash"
    with pytest.raises(ConfigError, match="key column `id`"):
        masks.for_columns(["db.t"], ["id"], key=["id"])


_ROWS = [
    {"s": "alice@example.com", "u": "trois é😀x", "b": b"\x00\x01\x02\x03", "i": -5, "d": Decimal("1.50"),
     "day": dt.date(2024, 1, 2), "ok": True, "f": 1.5},
    {"s": None, "u": "", "b": None, "i": None, "d": None, "day": None, "ok": None, "f": None},
]  # fmt: skip
_SCHEMA = "s string, u string, b binary, i int, d decimal(10,2), day date, ok boolean, f double"


@pytest.mark.parametrize("algorithm", ["MD5", "SHA-1", "SHA-224", "SHA-256", "SHA-384", "SHA-512"])
def test_spark_and_arrow_hide_alike(spark: Any, algorithm: str) -> None:
    masks = _masks(
        {
            f"column.mask.hash.{algorithm}.with.salt.{SALT}": "db.t.s,db.t.b,db.t.i,db.t.d,db.t.day,db.t.ok",
            "column.mask.with.4.chars": "db.t.f",
            "column.truncate.to.3.chars": "db.t.u",
        }
    )
    df = spark.createDataFrame([tuple(r.values()) for r in _ROWS], _SCHEMA)
    rules = masks.for_columns(["db.t"], df.columns)
    from_spark = [r.asDict() for r in masked_frame(df, rules).collect()]
    batch = pa.RecordBatch.from_pylist(_ROWS, schema=df.toArrow().schema)
    from_arrow = masked_batch(batch, rules).to_pylist()
    assert from_spark == from_arrow

    name = algorithm.lower().replace("-", "")
    salted = {"s": b"alice@example.com", "b": b"\x00\x01\x02\x03", "i": b"-5", "d": b"1.50", "day": b"2024-01-02"}
    for column, raw in {**salted, "ok": b"true"}.items():
        assert from_spark[0][column] == hashlib.new(name, SALT.encode() + raw).hexdigest(), column
    assert from_spark[0]["f"] == "****" and from_spark[0]["u"] == "tro"  # characters, not bytes
    assert from_spark[1] == {"s": None, "u": "", "b": None, "i": None, "d": None, "day": None, "ok": None, "f": None}
    # the topic's schema says how, and drops the database type a hash no longer fits
    fields = {f.name: f for f in masked_frame(df, rules).schema.fields}
    assert fields["i"].dataType.simpleString() == "string"
    assert fields["i"].metadata["connect.masked"] == f"hash {algorithm} of salt + value (hex)"


def test_a_type_without_one_text_on_both_paths_is_not_hashed(spark: Any) -> None:
    masks = _masks({f"column.mask.hash.SHA-256.with.salt.{SALT}": "db.t.f"})
    df = spark.createDataFrame([(1.5,)], "f double")
    rules = masks.for_columns(["db.t"], ["f"])
    for attempt in (lambda: masked_frame(df, rules), lambda: masked_batch(pa.record_batch({"f": [1.5]}), rules)):
        with pytest.raises(ConfigError, match="only text, binary, integer") as refused:
            attempt()
        assert "with.salt.********" in str(refused.value) and SALT not in str(refused.value)
