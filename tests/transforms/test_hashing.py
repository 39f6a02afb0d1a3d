"""HashField: keyed HMAC-SHA256 of fields, on both paths, equal to Python's `hmac`; its key is a
secret (masked, never in an error) that a config provider may fill, and only HashField's may."""

from __future__ import annotations

import base64
import hashlib
import hmac
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from pydantic import ValidationError

from connect_core.runtime.context import Runtime
from connect_core.runtime.lineage import run_lineage
from connect_core.runtime.plugins import PluginRegistry
from connect_core.runtime.processing.config import build_chain, problems
from connect_core.runtime.security import ConfigProviders, SecretMasker
from connect_core.runtime.security.masking import mask_config
from connect_core.runtime.topics.segments import read_topics
from connect_core.sdk.records import TopicPartition
from connect_core.sdk.transforms import DataError
from connect_core.transforms.hashing import HashFieldConfig, HashFieldKey, HashFieldValue, hmac_sha256
from tests.conftest import make_runner
from tests.connectors.jdbc_helpers import Database, postgres, synced  # noqa: F401  (fixtures)
from tests.transforms.conftest import chain, make, run_both

KEY = "k3y-for-tests-0123456789abcdef"


def _mac(value: bytes, key: str = KEY) -> str:
    return hmac.new(key.encode(), value, hashlib.sha256).hexdigest()


def test_fields_become_their_hmac_on_both_paths(spark: Any) -> None:
    rows = [
        {"id": 1, "email": "alice@example.com", "phone": 5550100, "note": "keep", "raw": b"\x00\xff"},
        {"id": 2, "email": None, "phone": None, "note": None, "raw": None},
    ]
    out = run_both(
        spark,
        chain(make(HashFieldValue, fields="email,phone,raw", **{"hmac.key": KEY})),
        rows,
        "id int, email string, phone bigint, note string, raw binary",
    )
    assert out[0]["email"] == _mac(b"alice@example.com") and len(out[0]["email"]) == 64
    assert out[0]["phone"] == _mac(b"5550100") and out[0]["raw"] == _mac(b"\x00\xff")
    assert out[0]["note"] == "keep" and out[0]["id"] == 1
    assert out[1]["email"] is None and out[1]["phone"] is None  # null stays null


def test_base64_and_the_key_variant(spark: Any) -> None:
    rows = [{"v": "x", "__key": {"id": "user-1"}}]
    out = run_both(
        spark,
        chain(make(HashFieldKey, fields="id", **{"hmac.key": KEY, "output.encoding": "base64"})),
        rows,
        "v string, __key struct<id:string>",
    )
    digest = hmac.new(KEY.encode(), b"user-1", hashlib.sha256).digest()
    assert out[0]["__key"] == {"id": base64.b64encode(digest).decode()} and out[0]["v"] == "x"


@pytest.mark.parametrize("key", [b"short key 16 byt", b"k" * 64, b"a much longer key than the 64-byte block " * 3])
def test_the_midstate_hmac_is_rfc_2104(key: bytes) -> None:
    for value in (b"", b"x", b"alice@example.com" * 20):
        assert hmac_sha256(key)(value) == hmac.new(key, value, hashlib.sha256).hexdigest()


def test_a_decimal_hashes_alike_on_both_paths_whatever_its_exponent(spark: Any) -> None:
    """Arrow's cast writes `1.00E-8` and `0E-10`, Spark's `0.0000000100` and `0.0000000000`: both
    paths hash the plain text (a window read either way gives one MAC)."""
    texts = ["0.0000000100", "-0.0000001000", "0.0000000000", "1.5000000000", "-9999999999.9999999999"]
    rows = [{"id": i, "d": Decimal(t)} for i, t in enumerate(texts)] + [{"id": len(texts), "d": None}]
    out = run_both(
        spark, chain(make(HashFieldValue, fields="d", **{"hmac.key": KEY})), rows, "id int, d decimal(20,10)"
    )
    assert [r["d"] for r in out] == [*(_mac(t.encode()) for t in texts), None]


def test_a_field_that_cannot_be_hashed_is_a_data_error(spark: Any) -> None:
    with pytest.raises(DataError, match="cannot hash field `f` of type double"):
        run_both(spark, chain(make(HashFieldValue, fields="f", **{"hmac.key": KEY})), [{"f": 1.5}], "f double")
    with pytest.raises(DataError, match="`nope`, not a field"):
        run_both(spark, chain(make(HashFieldValue, fields="nope", **{"hmac.key": KEY})), [{"f": "a"}], "f string")


def test_a_short_key_is_refused_without_showing_it() -> None:
    with pytest.raises(ValidationError) as refused:
        HashFieldConfig.model_validate({"fields": "a", "hmac.key": "tooshort"})
    assert "at least 16 bytes" in str(refused.value)
    config = {"transforms": "h", "transforms.h.type": "HashField$Value", "transforms.h.fields": "a"}
    found = problems({**config, "transforms.h.hmac.key": "tooshort"}, PluginRegistry())
    assert found == {"transforms.h.hmac.key": ["Value error, must be at least 16 bytes long (UTF-8)"]}
    assert "tooshort" not in repr(found)


def test_a_key_from_a_provider_is_not_checked_so_a_run_tells_nothing_of_it(tmp_path: Any) -> None:
    """Whoever creates a connector may point `hmac.key` at any secret a provider reads: a run that
    failed on a short one would tell them its length. Only a key written in the config is checked."""
    keys = tmp_path / "pii.properties"
    keys.write_text("short=tooshort\nlong=" + KEY + "\n")
    config = {
        "transforms": "h",
        "transforms.h.type": "HashField$Value",
        "transforms.h.fields": "a",
        "transforms.h.hmac.key": f"${{file:{keys}:short}}",
    }
    registry = PluginRegistry()
    assert problems(config, registry) == {}  # at create: the placeholder, checked for what it may read
    providers = ConfigProviders({"file"}, file_allowed_paths=[tmp_path], secret_masker=SecretMasker())
    for name, secret in (("short", "tooshort"), ("long", KEY)):
        resolved = providers.resolve({**config, "transforms.h.hmac.key": f"${{file:{keys}:{name}}}"})
        assert problems(resolved, registry) == {}  # where the task runs: the same answer for either
        (step,) = build_chain(resolved, registry).steps
        assert step.transform.arrow(pa.record_batch({"a": ["x"]}))["a"].to_pylist() == [_mac(b"x", secret)]
    assert "transforms.h.hmac.key" in problems({**config, "transforms.h.hmac.key": "tooshort"}, registry)


def test_the_key_may_come_from_a_config_provider_and_is_masked_everywhere(tmp_path: Any) -> None:
    keys = tmp_path / "pii.properties"
    keys.write_text(f"pii={KEY}\n")
    config = {
        "connector.class": "JdbcSourceConnector",
        "transforms": "h,s",
        "transforms.h.type": "HashField$Value",
        "transforms.h.fields": "email",
        "transforms.h.hmac.key": f"${{file:{keys}:pii}}",
        # the same placeholder where another transform would compute over it: refused
        "transforms.s.type": "InsertField$Value",
        "transforms.s.static.field": "leak",
        "transforms.s.static.value": f"${{file:{keys}:pii}}",
    }
    masker = SecretMasker()
    providers = ConfigProviders({"file"}, file_allowed_paths=[tmp_path], secret_masker=masker)
    found = providers.problems(config)
    assert list(found) == ["transforms.s.static.value"]
    # a type other than HashField's under the same option name cannot take it either
    for other in ("MaskField$Value", "com.example.NotHashField$Value"):
        assert "transforms.h.hmac.key" in providers.problems({**config, "transforms.h.type": other})
    for alias in (
        "org.apache.kafka.connect.transforms.HashField$Value",
        "connect_core.transforms.hashing.HashFieldValue",
    ):
        assert "transforms.h.hmac.key" not in providers.problems({**config, "transforms.h.type": alias})

    del config["transforms.s.static.value"], config["transforms.s.static.field"], config["transforms.s.type"]
    config["transforms"] = "h"
    resolved = providers.resolve(config)
    assert resolved["transforms.h.hmac.key"] == KEY
    assert KEY not in masker.text(f"a log line holding {KEY}")  # known as a secret from now on
    built = build_chain(resolved, PluginRegistry())
    assert built.steps[0].transform.column_notes() == {"email": "HMAC-SHA256 (hex)"}
    # shown (REST, DAG docs): the key is masked by its name, a literal one as well as a placeholder
    assert mask_config({**config, "transforms.h.hmac.key": KEY})["transforms.h.hmac.key"] == "********"


def test_a_transform_built_from_a_stored_config_never_hashes_with_the_placeholder(spark: Any) -> None:
    unresolved = make(HashFieldValue, fields="a", **{"hmac.key": "${env:PII_KEY}"})
    with pytest.raises(DataError, match="unresolved config provider placeholder"):
        run_both(spark, chain(unresolved), [{"a": "x"}], "a string")


def test_a_source_hashes_with_a_key_from_the_environment_end_to_end(
    settings: Any,
    spark: Any,
    postgres: Database,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The key is read where the task runs: the store and every shown config hold the placeholder;
    the topic holds the MACs; lineage says which fields and how."""
    monkeypatch.setenv("PII_KEY", KEY)
    caplog.set_level("INFO", logger="connect")
    runtime = Runtime.open(settings.model_copy(update={"config_providers": "env"}))
    try:
        postgres.execute(
            "CREATE TABLE users (id int PRIMARY KEY, email text)", "INSERT INTO users VALUES (1, 'a@example.com')"
        )
        config = postgres.source_config(
            **{
                "table.whitelist": "users",
                "topic.prefix": "h_",
                "transforms": "pii",
                "transforms.pii.type": "HashField$Value",
                "transforms.pii.fields": "email",
                "transforms.pii.hmac.key": "${env:PII_KEY}",
            }
        )
        runtime.create_connector("src", config)
        assert runtime.connectors.get("src").config["transforms.pii.hmac.key"] == "${env:PII_KEY}"
        synced(make_runner(runtime, spark), "src")
        segments = runtime.topics.segments_after({TopicPartition("h_users", 0): 0})
        (row,) = read_topics(spark, segments)["h_users"].collect()
        assert (row["id"], row["email"]) == (1, _mac(b"a@example.com"))
        (topic,) = run_lineage(runtime, "src", 0).outputs
        assert [(m.field, m.how) for m in topic.masked] == [("email", "HMAC-SHA256 (hex), transform `pii`")]
        assert KEY not in caplog.text and KEY not in repr(runtime.connectors.last_runs("src", 5))
    finally:
        runtime.close()
