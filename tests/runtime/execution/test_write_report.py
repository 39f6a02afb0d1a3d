"""What the runtime keeps of a sink's `write` metadata as the run's `target`: its numbers and the
tables it names, bounded and typed whatever a plugin returns."""

from __future__ import annotations

from typing import Any

import pytest

from connect_core.runtime.execution.runner import _write_report


def test_the_numbers_and_tables_a_sink_reports_are_kept() -> None:
    report = {
        "rows_written": 5,
        "keys_deleted": 0,
        "files_written": 2,
        "bytes_written": 1234,
        "tables": [{"name": "shop.orders", "version": 86231}, {"name": "/lake/events", "version": "3"}],
        "anything": "else",
    }
    assert _write_report(report) == {
        "rows_written": 5,
        "keys_deleted": 0,
        "files_written": 2,
        "bytes_written": 1234,
        "tables": [{"name": "shop.orders", "version": "86231"}, {"name": "/lake/events", "version": "3"}],
    }


@pytest.mark.parametrize(
    "tables",
    [None, "shop.orders", {"name": "t"}, [1, "t", None, {"name": 3}, {"name": ""}, {"version": "1"}], []],
)
def test_tables_that_are_not_named_mappings_are_left_out(tables: Any) -> None:
    assert _write_report({"rows_written": -1, "files_written": True, "tables": tables}) == {}


def test_a_flood_of_tables_or_long_names_is_cut() -> None:
    tables = [{"name": "n" * 10_000, "version": "v" * 10_000}] * 1_000
    kept = _write_report({"tables": tables})["tables"]
    assert len(kept) == 20
    assert all(len(t["name"]) == 300 and len(t["version"]) == 40 for t in kept)


def test_no_credential_a_table_name_carries_reaches_the_runs_stats() -> None:
    """A sink is a plugin: a table it names by a URI may carry userinfo, a signed query or a value
    a config provider resolved. The run's stats keep the scheme, the host and the path only."""
    from connect_core.runtime.security import masking

    masking.masker.add("s3cr3t-from-a-provider")
    tables = [
        {"name": "s3://AKIAEXAMPLEKEY:wJalrXUtnFEMI@bucket/lake/orders", "version": "1"},
        {"name": "s3://AKIAEXAMPLEKEY@bucket/lake/items", "version": "2"},
        {"name": "https://host/t?X-Amz-Signature=abcdef0123&sig=zz#frag", "version": "3"},
        {"name": "s3://bucket/s3cr3t-from-a-provider/t", "version": "s3cr3t-from-a-provider"},
    ]
    kept = _write_report({"tables": tables})["tables"]
    assert [t["name"] for t in kept] == [
        "s3://bucket/lake/orders",
        "s3://bucket/lake/items",
        "https://host/t",
        "s3://bucket/********/t",
    ]
    assert kept[3]["version"] == "********"
    shown = repr(kept)
    for secret in ("AKIAEXAMPLEKEY", "wJalrXUtnFEMI", "abcdef0123", "zz", "frag", "s3cr3t"):
        assert secret not in shown
