"""The slowest tests of a run, from pytest's JUnit XML report (`--junitxml`), as text.

    python -m connect_core.testing.durations test-artifacts/junit.xml [--top 30]

prints the `--top` slowest tests (setup, call and teardown together: a fixture a test starts is
its cost), then the slowest test files by their tests' total. scripts/test.sh writes it to
test-artifacts/durations.txt after every run, failed ones included.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TestTime", "main", "read_report", "summary"]


@dataclass(frozen=True)
class TestTime:
    file: str  # tests/runtime/store/test_migrations.py
    name: str  # test_upgrade_downgrade_upgrade[param]
    seconds: float
    outcome: str  # passed | failed | error | skipped


def read_report(path: Path) -> list[TestTime]:
    """Every test case of a JUnit XML report (pytest's: `classname` is the dotted module, then classes)."""
    times = []
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
        classname = case.get("classname", "")
        module = classname.split(".")
        # pytest's classname holds the test's classes after the module: keep what names a file
        file = case.get("file") or "/".join(p for p in module if p and not p[0].isupper()) + ".py"
        times.append(TestTime(file, case.get("name", "?"), float(case.get("time") or 0), outcome))
    return times


def summary(times: Sequence[TestTime], top: int = 30) -> str:
    total = sum(t.seconds for t in times)
    lines = [f"{len(times)} tests, {total:.0f} s in all (each test's setup, call and teardown)", ""]
    lines.append(f"slowest {min(top, len(times))} tests:")
    for t in sorted(times, key=lambda t: t.seconds, reverse=True)[:top]:
        mark = "" if t.outcome == "passed" else f"  [{t.outcome}]"
        lines.append(f"{t.seconds:8.2f}s  {t.file}::{t.name}{mark}")
    by_file: dict[str, float] = defaultdict(float)
    for t in times:
        by_file[t.file] += t.seconds
    files = sorted(by_file.items(), key=lambda item: item[1], reverse=True)[:top]
    lines += ["", f"slowest {len(files)} test files:"]
    lines += [f"{seconds:8.2f}s  {file}" for file, seconds in files]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("report", type=Path, help="pytest's --junitxml file")
    parser.add_argument("--top", type=int, default=30, help="how many tests and files to list")
    args = parser.parse_args(argv)
    if not args.report.is_file():
        print(f"durations: no report at {args.report} (did pytest run with --junitxml?)", file=sys.stderr)
        return 1
    sys.stdout.write(summary(read_report(args.report), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
