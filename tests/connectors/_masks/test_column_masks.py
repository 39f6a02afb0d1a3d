"""Debezium's column mask keys: what they parse to, what they refuse (by key, the salt never shown),
and the same values on the Spark and the Arrow path (a source reads a small window as Arrow, a big
one through Spark: a hash must not depend on which)."""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from decimal import Context, Decimal
from typing import Any

import pyarrow as pa
import pytest

from connect_core.connectors._masks import ColumnMasks, masked_batch, masked_frame, parse_masks, salt_of, shown_key
from connect_core.connectors.jdbc.config import JdbcSourceConfig
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
        # Debezium matches its keys case-sensitively (and ignores any other): refused, the salt masked
        (f"Column.Mask.Hash.SHA-256.with.salt.{SALT}", "a.b.c", "in lower case, as Debezium does"),
        (f"column.mask.hash.SHA-256.WITH.SALT.{SALT}", "a.b.c", "in lower case, as Debezium does"),
        (f"column.mask.hash.V2.SHA-256.with.salt.{SALT}", "a.b.c", "in lower case, as Debezium does"),
        ("Column.Mask.With.4.Chars", "a.b.c", "in lower case, as Debezium does"),
        ("COLUMN.TRUNCATE.TO.3.CHARS", "a.b.c", "in lower case, as Debezium does"),
        # near misses of the family: refused, whatever follows the algorithm (or the family) masked
        (f"column.mask.hash.SHA-256.with_salt.{SALT}", "a.b.c", "column.mask.hash.<algorithm>.with.salt.<salt>"),
        (f"column.mask.hash.SHA-256.withsalt{SALT}", "a.b.c", "column.mask.hash.<algorithm>.with.salt.<salt>"),
        (f"column.mask.hash.{SALT}", "a.b.c", "column.mask.hash.<algorithm>.with.salt.<salt>"),
        (f"column_mask_hash_SHA-256_with_salt_{SALT}", "a.b.c", "unknown column mask key"),
        (f"columns.mask.hash.SHA-256.with.salt.{SALT}", "a.b.c", "unknown column mask key"),
        (f"column.mask.sha256.with.salt.{SALT}", "a.b.c", "unknown column mask key"),
        # a pattern that can name no `<schema>.<table>.<column>`: Debezium would leave the column in clear
        (f"column.mask.hash.SHA-256.with.salt.{SALT}", "email", "`email` can name no column"),
        ("column.mask.with.4.chars", "public.users.email, ssn", "`ssn` can name no column"),
    ],
)
def test_a_bad_key_is_a_400_naming_it_with_the_salt_masked(key: str, value: str, says: str) -> None:
    registry = PluginRegistry()
    with pytest.raises(ConfigError) as refused:
        # with another problem: every one is reported at once
        validate_connector("c", _jdbc(**{key: value, "fetch.size": 0}), registry)
    shown = shown_key(key)
    assert "short" not in shown and SALT not in shown and SALT.lower() not in shown.lower()
    assert any(says in m for m in refused.value.errors[shown]), refused.value.errors
    assert "fetch.size" in refused.value.errors
    assert SALT not in str(refused.value) and SALT not in repr(refused.value.errors)
    infos = config_infos(_jdbc(**{key: value}), registry)
    assert SALT not in repr(infos)
    assert any(c["value"]["name"] == shown and c["value"]["errors"] for c in infos["configs"])


@pytest.mark.parametrize(
    ("key", "shown"),
    [
        (f"column.mask.hash.SHA-256.with.salt.{SALT}", "column.mask.hash.SHA-256.with.salt.********"),
        (f"column.mask.hash.v2.md5.with.salt.{SALT}", "column.mask.hash.v2.md5.with.salt.********"),
        (f"Column.Mask.Hash.SHA-256.With.Salt.{SALT}", "Column.Mask.Hash.SHA-256.With.Salt.********"),
        (f"column.mask.hash.SHA3-256.with.salt.{SALT}", "column.mask.hash.SHA3-256.with.salt.********"),
        # `.with.salt.` missing or misspelt: everything after the algorithm (a known one) is masked
        (f"column.mask.hash.SHA-256.with_salt.{SALT}", "column.mask.hash.SHA-256.********"),
        (f"column.mask.hash.sha256.salt.{SALT}", "column.mask.hash.sha256.********"),
        (f"column.mask.hash.{SALT}.with_salt.x", "column.mask.hash.********"),
        (f"column.mask.hash.a.b.with.salt.{SALT}", "column.mask.hash.********"),
        (f"column_mask_hash_SHA-256_with_salt_{SALT}", "column_mask********"),
        (f"column.mask.sha1.with.salt.{SALT}", "column.mask.sha1.with.********"),
        ("column.mask.hash.SHA-256", "column.mask.hash.SHA-256"),
        ("column.mask.with.4.chars", "column.mask.with.4.chars"),
        ("COLUMN.TRUNCATE.TO.3.CHARS", "COLUMN.TRUNCATE.TO.3.CHARS"),
        ("column.mask.width.3.chars", "column.mask.********"),
        ("column.propagate.source.type", "column.propagate.source.type"),  # not of the family
        ("connection.url", "connection.url"),
    ],
)
def test_a_shown_key_of_the_family_masks_all_but_its_known_words(key: str, shown: str) -> None:
    assert shown_key(key) == shown
    hidden = salt_of(key)
    assert (hidden is None) == (shown == key)
    assert hidden is None or (key == shown[: -len("********")] + hidden and (SALT in key) <= (SALT in hidden))


def test_every_problem_of_a_key_is_reported_at_once() -> None:
    problems = parse_masks({f"column.mask.hash.SHA-999.with.salt.{SALT}": "email"})[1]
    assert list(problems) == ["column.mask.hash.SHA-999.with.salt.********"]
    (pattern, algorithm) = problems["column.mask.hash.SHA-999.with.salt.********"]
    assert "`email` can name no column" in pattern and "`SHA-999` is not one of" in algorithm


def test_the_algorithm_may_be_written_in_any_case_as_java_takes_it() -> None:
    masks = _masks(
        {f"column.mask.hash.sha-256.with.salt.{SALT}": "db.t.a", f"column.mask.hash.Sha512.with.salt.{SALT}": "db.t.b"}
    )
    assert sorted(r.algorithm for r in masks.rules) == ["SHA-256", "SHA-512"]


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


def test_a_rule_that_named_no_column_of_the_tables_read_is_warned_of(caplog: pytest.LogCaptureFixture) -> None:
    masks = _masks(
        {
            f"column.mask.hash.SHA-256.with.salt.{SALT}": "inventory.customers.email",  # another schema
            "column.mask.with.3.chars": "public.users.ssn",
            "column.truncate.to.2.chars": "public.orders.zip",  # a table this run did not read
        }
    )
    log = logging.getLogger("connect.test-masks")
    masks.warn_unmatched(log)  # nothing read yet: nothing to tell
    assert masks.unmatched() == [] and not caplog.records
    assert set(masks.for_columns(["public.users", "users"], ["id", "email", "ssn"])) == {"ssn"}
    assert [r.kind for r in masks.unmatched()] == ["hash", "truncate"]
    with caplog.at_level("WARNING", logger="connect.test-masks"):
        masks.warn_unmatched(log)
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2 and all("matched no column of the table(s) read (public.users)" in w for w in warned)
    assert "`column.mask.hash.SHA-256.with.salt.********`" in warned[0] and "inventory.customers.email" in warned[0]
    assert SALT not in caplog.text
    # a config's rules are made once: the reads of one run (a snapshot, then the stream) share what they met
    config = JdbcSourceConfig.model_validate(_jdbc(**{"column.mask.with.3.chars": "public.users.ssn"}))
    assert config.column_masks() is config.column_masks()


@pytest.mark.parametrize(
    ("precision", "scale", "values"),
    [
        (20, 10, ["0.0000000100", "-0.0000001000", "0E-10", "1.5", "-9999999999.9999999999", "0.000001"]),
        (38, 30, ["0.000000000000000000000000000001", "12345678.123456789012345678901234567890", "0"]),
        (38, 38, ["0.00000000000000000000000000000000000001", "-0.1"]),
        (5, 5, ["0.00001", "0"]),
        (38, 0, ["100000000000000000000000000000000000", "-1"]),
    ],
)
def test_a_decimal_hashes_alike_on_both_paths_whatever_its_exponent(
    spark: Any, precision: int, scale: int, values: list[str]
) -> None:
    """Arrow's cast writes `1.00E-8` and `0E-10` where Spark's writes `0.0000000100` and
    `0.0000000000`: the hash of a small decimal must not depend on the path a window took."""
    exact = Context(prec=80)
    step = Decimal(1).scaleb(-scale)
    decimals = [Decimal(v).quantize(step, context=exact) for v in values] + [None]
    masks = _masks({f"column.mask.hash.SHA-256.with.salt.{SALT}": "db.t.d"})
    df = spark.createDataFrame([(d,) for d in decimals], f"d decimal({precision},{scale})")
    rules = masks.for_columns(["db.t"], ["d"])
    from_spark = [r["d"] for r in masked_frame(df, rules).collect()]
    batch = pa.RecordBatch.from_pylist([{"d": d} for d in decimals], schema=df.toArrow().schema)
    from_arrow = masked_batch(batch, rules).column("d").to_pylist()
    plain = [None if d is None else format(d, "f") for d in decimals]
    assert (
        from_spark
        == from_arrow
        == [None if text is None else hashlib.sha256((SALT + text).encode()).hexdigest() for text in plain]
    )
    assert "0.0000000100" in plain or precision != 20  # the case Arrow writes as `1.00E-8`
