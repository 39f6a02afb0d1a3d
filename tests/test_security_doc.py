"""docs/security.md's role table says what the code does: each route it names needs the role of its row."""

from __future__ import annotations

import re
from pathlib import Path

from connect_core.runtime.security.roles import ROUTE_ROLES, Role, required_role

DOC = Path(__file__).resolve().parents[1] / "docs" / "security.md"
_ROUTE = re.compile(r"`(GET|POST|PUT|PATCH|DELETE) (/[^`]*)`")


def test_the_role_table_agrees_with_the_code() -> None:
    rows = [
        line for line in DOC.read_text().splitlines() if re.match(r"\| [^|]+ \| (viewer|connector|operator) \|", line)
    ]
    assert len(rows) >= 7
    named = 0
    for row in rows:
        role = Role[row.split("|")[2].strip()]
        for method, path in _ROUTE.findall(row):
            assert (method, path) in ROUTE_ROLES, f"docs/security.md names `{method} {path}`, which is no route"
            assert required_role(method, path) is role, f"`{method} {path}` needs {required_role(method, path).name}"
            named += 1
    operator_routes = {f"{m} {p}" for (m, p), r in ROUTE_ROLES.items() if r is Role.operator}
    documented = {f"{m} {p}" for row in rows for m, p in _ROUTE.findall(row)}
    assert operator_routes <= documented, f"operator routes missing from the table: {operator_routes - documented}"
    assert named > 30
