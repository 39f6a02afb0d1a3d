"""The tolerant COPY against a real PostgreSQL: exactly the refused rows are set aside, also when
values hold newlines (PostgreSQL names physical lines), and every other row goes in once."""

from __future__ import annotations

import random

import pyarrow as pa

from connect_core.connectors.jdbc.targets import _postgres_tolerant as _tolerant
from tests.connectors.jdbc_helpers import Database, target  # noqa: F401  (fixtures)


def test_exactly_the_refused_rows_are_set_aside(target: Database) -> None:  # noqa: F811
    target.execute("CREATE TABLE t (id int PRIMARY KEY, body varchar(12) NOT NULL, n int)")
    rng = random.Random(7)
    rows, expected_bad = [], set()
    for i in range(3000):
        body: str | None = rng.choice(["a", "multi\nline", "x\r\ny\nz", 'quote"d', ""])
        n: str | None = str(i)
        if i % 97 == 5:
            body = "far too long a value"
            expected_bad.add(i)
        elif i % 89 == 3:
            body = None
            expected_bad.add(i)
        elif i % 83 == 1:
            n = "not a number"
            expected_bad.add(i)
        rows.append({"id": i, "body": body, "n": n, "_p": 0, "_o": i})
    table = pa.Table.from_pylist(rows, schema=pa.schema([
        ("id", pa.int64()), ("body", pa.string()), ("n", pa.string()), ("_p", pa.int32()), ("_o", pa.int64()),
    ]))  # fmt: skip
    conn = target.connect()
    conn.autocommit = False
    try:
        with conn.cursor() as cur:
            bad = _tolerant.copy_chunks(cur, "COPY t (id, body, n) FROM STDIN WITH (FORMAT csv)", table, 3, 4, 3)
        conn.commit()
    finally:
        conn.close()
    assert {o for _, o, _, _ in bad} == expected_bad
    kept = target.rows("SELECT id, body FROM t ORDER BY id")
    assert [r[0] for r in kept] == [i for i in range(3000) if i not in expected_bad]
    assert all(r[1] == rows[r[0]]["body"] for r in kept)  # newlines and quotes intact
    classes = {cls.rsplit(".", 1)[-1] for _, _, cls, _ in bad}
    assert classes == {"StringDataRightTruncation", "NotNullViolation", "InvalidTextRepresentation"}
