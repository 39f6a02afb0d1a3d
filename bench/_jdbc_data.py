"""The source table `bench_events` of the JDBC benchmark, in PostgreSQL and in MariaDB, and its checksums.

The rows are a pure function of the id, written twice: PostgreSQL gets one
`INSERT … SELECT … FROM generate_series(1, N)`, MariaDB one `INSERT … SELECT … FROM seq_1_to_N` (its
SEQUENCE engine) with the same expressions in its dialect. Both tables hold identical rows:
`source_checksum("pg") == source_checksum("mariadb")`, which `python bench/_jdbc_data.py` prints.
Measured at 1M rows: MariaDB-native 5.9 s against 7.6 s for streaming PostgreSQL's generator
`COPY … TO STDOUT | LOAD DATA LOCAL INFILE '/dev/stdin'` (`create_mariadb_via_load_data`, kept for
that comparison: `--compare-mariadb`); PostgreSQL 4.2 s (load, then PK + index, VACUUM).

Checksums are exact and order-independent: every value is rendered as a *canonical text* that both
databases can produce identically (below), the row is those texts joined by U+001F with `\\N` for
NULL, and the checksum is (row count, sum over rows of the first 60 bits of md5(row)) — an exact
numeric sum, so a missing, duplicated or altered row changes it. Canonical texts:

* integers, booleans: decimal digits (`1`/`0` for booleans, whatever the column type became);
* DECIMAL(18,4): the exact decimal without trailing zeros (`trim_scale` / TRIM in MariaDB): a tool
  that went through DOUBLE loses digits (values have 18 significant digits) and is caught;
* DOUBLE: the value times 1024, printed. Generated values are k/1024 with k < 2^40, so this is an
  integer printed the same way by both databases; a tool off by one ulp prints a fraction;
* timestamps: `YYYY-MM-DD HH:MI:SS.ffffff` (microseconds; the checksum session runs in UTC);
  dates `YYYY-MM-DD`;
* JSON: PostgreSQL's `jsonb` text (keys sorted by length then bytes, `", "` / `": "`). MariaDB has
  no such normal form: its JSON column (a LONGTEXT) holds text the generator spells in exactly
  that form, and it is hashed as stored;
* text: as is (UTF-8; MD5 in both databases hashes the UTF-8 bytes).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import psycopg2
import pymysql


@dataclass(frozen=True)
class Server:
    """Where a database server listens and who logs in (from a URL; its path is ignored)."""

    host: str
    port: int
    user: str
    password: str

    @classmethod
    def from_url(cls, url: str, default_port: int, default_user: str) -> Server:
        parts = urlsplit(url)
        return cls(
            parts.hostname or "127.0.0.1",
            parts.port or default_port,
            unquote(parts.username or default_user),
            unquote(parts.password or ""),
        )

    def netloc(self) -> str:
        auth = f"{self.user}:{self.password}" if self.password else self.user
        return f"{auth}@{self.host}:{self.port}"


PG_SERVER = Server.from_url(
    os.environ.get("CONNECT_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"), 5432, "postgres"
)
MARIADB_SERVER = Server.from_url(
    os.environ.get("CONNECT_BENCH_MARIADB_URL", "mysql://root@127.0.0.1:3306/test"), 3306, "root"
)
SOURCE_DB = "bench_source"
TARGET_DB = "bench_target"
TABLE = "bench_events"
KINDS = ("pg", "mariadb")
# A touched row's updated_at is after every generated one (those end in 2020), and in the past:
# a timestamp-mode source reads rows only once their timestamp has passed.
TOUCH_EPOCH = "2024-01-01 00:00:00"

# (name, PostgreSQL type, MariaDB type, logical kind used for the canonical text)
COLUMNS: tuple[tuple[str, str, str, str], ...] = (
    ("id", "bigint NOT NULL", "BIGINT NOT NULL", "int"),
    ("small_val", "smallint", "SMALLINT", "int"),
    ("int_val", "integer", "INT", "int"),
    ("big_val", "bigint", "BIGINT", "int"),
    ("amount", "numeric(18,4)", "DECIMAL(18,4)", "decimal"),
    ("score", "double precision", "DOUBLE", "double"),
    ("label", "varchar(64)", "VARCHAR(64)", "text"),
    ("body", "text", "TEXT", "text"),
    ("flag", "boolean", "BOOLEAN", "bool"),
    ("event_date", "date", "DATE", "date"),
    ("created_at", "timestamp(6)", "DATETIME(6)", "timestamp"),
    ("updated_at", "timestamp(6) NOT NULL", "DATETIME(6) NOT NULL", "timestamp"),
    ("payload", "jsonb", "JSON", "json"),
)
COLUMN_NAMES = tuple(c[0] for c in COLUMNS)

# Labels and bodies carry what breaks naive pipelines: multi-byte UTF-8 (é, 中, emoji: MariaDB needs
# utf8mb4), quotes, backslashes, a literal "\N", the string 'NULL', '' next to NULL, tab/LF/CR.
_GENERATOR = r"""
SELECT n AS id,
  (CASE WHEN n % 50 = 0 THEN NULL ELSE n % 65535 - 32767 END)::smallint AS small_val,
  ((n * 2654435761) % 4294967291 - 2147483645)::integer AS int_val,
  CASE WHEN n % 7 = 0 THEN NULL WHEN n = 1 THEN 9223372036854775807 WHEN n = 2 THEN -9223372036854775808
       ELSE n * 92233720368 * (1 - 2 * (n % 2)) END AS big_val,
  (CASE WHEN n % 11 = 0 THEN NULL
        ELSE (n::numeric * 1234567890123 % 1000000000000000000) / 10000 * (1 - 2 * (n % 3 = 0)::int)
   END)::numeric(18,4) AS amount,
  CASE WHEN n % 13 = 0 THEN NULL
       ELSE ((n * 1469598103) % 1099511627776)::float8 / 1024 * (1 - 2 * (n % 5 = 0)::int) END AS score,
  CASE WHEN n % 17 = 0 THEN NULL WHEN n % 17 = 1 THEN '' WHEN n % 17 = 2 THEN 'NULL'
       ELSE (ARRAY['café crème', '中文标签', 'party 🎉🎈', 'naïve façade', 'plain ascii',
                   'Grüße, "quoted"', '日本語テキスト', 'back\slash \N'])[(n % 8 + 1)::int] || ' #' || n END AS label,
  CASE WHEN n % 19 = 0 THEN NULL
       WHEN n % 20 = 1 THEN left(repeat('Lorem ipsum dolor sit amet, consectetur adipiscing elit. ', 4), 200)
       WHEN n % 20 = 2 THEN 'tab' || chr(9) || 'newline' || chr(10) || 'cr' || chr(13) || 'end ' || n
       WHEN n % 20 = 3 THEN 'NULL'
       ELSE 'event ' || n || ' ' || left(md5(n::text), (4 + n % 8)::int) END AS body,
  CASE WHEN n % 23 = 0 THEN NULL ELSE n % 3 = 0 END AS flag,
  CASE WHEN n % 29 = 0 THEN NULL ELSE date '2000-01-01' + (n % 10000)::int END AS event_date,
  CASE WHEN n % 31 = 0 THEN NULL
       ELSE timestamp '2020-01-01' + n * interval '1 second' + (n % 1000000) * interval '1 microsecond'
  END AS created_at,
  timestamp '2020-01-01' + (n + n % 86400) * interval '1 second' + (n * 7 % 1000000) * interval '1 microsecond'
    AS updated_at,
  CASE WHEN n % 37 = 0 THEN NULL
       ELSE jsonb_build_object('n', n, 'tag', (ARRAY['é', '中', '🎉', 'x'])[(n % 4 + 1)::int])
  END AS payload
FROM generate_series(1, {rows}::bigint) AS n
"""


def _generator(rows: int) -> str:
    return _GENERATOR.format(rows=int(rows))


@dataclass(frozen=True)
class Checksum:
    """Row count and the exact sum of each row's 60-bit md5 prefix over canonical texts."""

    rows: int
    digest: int

    def __str__(self) -> str:
        return f"{self.rows} rows / {self.digest}"


# --- connections ---------------------------------------------------------------------------------


def pg_url(database: str) -> str:
    return f"postgresql://{PG_SERVER.netloc()}/{database}"


def mariadb_url(database: str, scheme: str = "mysql") -> str:
    return f"{scheme}://{MARIADB_SERVER.netloc()}/{database}"


def pg_cli(database: str) -> list[str]:
    """psql for `database`: no ~/.psqlrc, stop at the first error (password, if any, by environment)."""
    server = PG_SERVER
    return [
        "psql",
        "-X",
        "-q",
        "-v",
        "ON_ERROR_STOP=1",
        "-h",
        server.host,
        "-p",
        str(server.port),
        "-U",
        server.user,
        "-d",
        database,
    ]


def mariadb_cli(database: str) -> list[str]:
    """mariadb for `database` in utf8mb4 (password, if any, by environment: MYSQL_PWD)."""
    server = MARIADB_SERVER
    args = ["mariadb", "-h", server.host, "-P", str(server.port), "-u", server.user]
    return [*args, "--default-character-set=utf8mb4", database]


def cli_env() -> dict[str, str]:
    env = dict(os.environ, PGTZ="UTC", TZ="UTC", PGCLIENTENCODING="UTF8")
    if PG_SERVER.password:
        env["PGPASSWORD"] = PG_SERVER.password
    if MARIADB_SERVER.password:
        env["MYSQL_PWD"] = MARIADB_SERVER.password
    return env


@contextmanager
def pg(database: str) -> Iterator[Any]:
    """An autocommit psycopg2 connection to `database` on the bench server, in UTC."""
    conn = psycopg2.connect(pg_url(database), options="-c timezone=UTC")
    conn.autocommit = True
    try:
        yield conn
    finally:
        conn.close()


@contextmanager
def mariadb(database: str | None) -> Iterator[Any]:
    server = MARIADB_SERVER
    conn = pymysql.connect(
        host=server.host,
        port=server.port,
        user=server.user,
        password=server.password,
        database=database,
        charset="utf8mb4",
        autocommit=True,
        init_command="SET time_zone = '+00:00'",
    )
    try:
        yield conn
    finally:
        conn.close()


def ensure_pg_database(name: str) -> None:
    with pg("postgres") as conn, conn.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
        if cur.fetchone() is None:
            cur.execute(f'CREATE DATABASE "{name}"')


def ensure_mariadb_database(name: str) -> None:
    with mariadb(None) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")


# --- DDL -----------------------------------------------------------------------------------------


def pg_create_table_sql(qualified: str, *, indexes: bool = True) -> str:
    cols = ", ".join(f"{name} {pg_type}" for name, pg_type, _, _ in COLUMNS)
    key = ", PRIMARY KEY (id)" if indexes else ""
    return f"CREATE TABLE {qualified} ({cols}{key})"


def _mariadb_create_table_sql() -> str:
    cols = ", ".join(f"{name} {my_type}" for name, _, my_type, _ in COLUMNS)
    # DATETIME(6), not TIMESTAMP(6): MariaDB's TIMESTAMP converts by session time zone and stops in
    # 2038; DATETIME is PostgreSQL's `timestamp without time zone`. utf8mb4 for 4-byte UTF-8 (emoji).
    return f"CREATE TABLE {TABLE} ({cols}, PRIMARY KEY (id)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"


# --- create --------------------------------------------------------------------------------------


def create_source(kind: str, rows: int) -> float:
    """(Re)create `bench_source.bench_events` of `kind` with rows 1..`rows`; returns seconds taken."""
    started = time.perf_counter()
    if kind == "pg":
        _create_pg(rows)
    elif kind == "mariadb":
        _create_mariadb(rows)
    else:
        raise ValueError(f"unknown source kind `{kind}`: use one of {', '.join(KINDS)}")
    return time.perf_counter() - started


def _create_pg(rows: int) -> None:
    ensure_pg_database(SOURCE_DB)
    with pg(SOURCE_DB) as conn, conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {TABLE}")
        # Load first, index after: one sort instead of 10M B-tree insertions.
        cur.execute(pg_create_table_sql(TABLE, indexes=False))
        cur.execute(f"INSERT INTO {TABLE} " + _generator(rows))
        cur.execute(f"ALTER TABLE {TABLE} ADD PRIMARY KEY (id)")
        cur.execute(f"CREATE INDEX {TABLE}_updated_at ON {TABLE} (updated_at)")
        # VACUUM sets hint bits and the visibility map now, so the first tool to read the table does
        # not pay for writing them (it would otherwise rewrite every page on its first scan).
        cur.execute(f"VACUUM (FREEZE, ANALYZE) {TABLE}")


def _mariadb_tsv_select(rows: int) -> str:
    """The generator as text MariaDB's LOAD DATA reads: booleans as 0/1, JSON in jsonb's canonical text."""
    cols = [
        f"{name}::int" if name == "flag" else f"{name}::text" if name == "payload" else name for name in COLUMN_NAMES
    ]
    return f"SELECT {', '.join(cols)} FROM ({_generator(rows)}) AS g"


def create_mariadb_via_load_data(rows: int) -> float:
    """The MariaDB source loaded from PostgreSQL's generator through LOAD DATA; returns seconds."""
    started = time.perf_counter()
    ensure_mariadb_database(SOURCE_DB)
    _mariadb_empty_table()
    # PostgreSQL's COPY text format (tab, \-escapes, \N) is LOAD DATA's default format, except that
    # COPY also writes \b \f \v: no generated value contains those characters.
    copy = subprocess.Popen(
        [*pg_cli(SOURCE_DB), "-c", f"COPY ({_mariadb_tsv_select(rows)}) TO STDOUT"],
        stdout=subprocess.PIPE,
        env=cli_env(),
    )
    load_sql = (
        "SET SESSION unique_checks = 0, foreign_key_checks = 0, time_zone = '+00:00'; "
        f"LOAD DATA LOCAL INFILE '/dev/stdin' INTO TABLE {TABLE} CHARACTER SET utf8mb4 "
        f"({', '.join(COLUMN_NAMES)}); SHOW WARNINGS;"
    )
    load = subprocess.run(
        [*mariadb_cli(SOURCE_DB), "--local-infile=1", "--batch", "-e", load_sql],
        stdin=copy.stdout,
        capture_output=True,
        text=True,
        env=cli_env(),
    )
    assert copy.stdout is not None
    copy.stdout.close()
    if copy.wait() != 0 or load.returncode != 0 or load.stdout.strip():
        raise RuntimeError(f"loading MariaDB `{TABLE}` failed: {load.stderr or load.stdout}")
    _mariadb_finish()
    return time.perf_counter() - started


def _mariadb_empty_table() -> None:
    with mariadb(SOURCE_DB) as conn, conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {TABLE}")
        cur.execute(_mariadb_create_table_sql())


def _mariadb_finish() -> None:
    with mariadb(SOURCE_DB) as conn, conn.cursor() as cur:
        cur.execute(f"ALTER TABLE {TABLE} ADD INDEX {TABLE}_updated_at (updated_at)")
        cur.execute(f"ANALYZE TABLE {TABLE}")
        cur.fetchall()


def _create_mariadb(rows: int) -> None:
    ensure_mariadb_database(SOURCE_DB)
    _mariadb_empty_table()
    with mariadb(SOURCE_DB) as conn, conn.cursor() as cur:
        # InnoDB's bulk insert into an empty table (no undo per row) needs these checks off.
        cur.execute("SET SESSION unique_checks = 0, foreign_key_checks = 0")
        cur.execute(f"INSERT INTO {TABLE} " + _MARIADB_GENERATOR.format(rows=int(rows)))
    _mariadb_finish()


# _GENERATOR in MariaDB's dialect. The JSON is spelled as PostgreSQL's jsonb prints it.
_MARIADB_GENERATOR = r"""
SELECT n,
  CASE WHEN n % 50 = 0 THEN NULL ELSE n % 65535 - 32767 END,
  n * 2654435761 % 4294967291 - 2147483645,
  CASE WHEN n % 7 = 0 THEN NULL WHEN n = 1 THEN 9223372036854775807 WHEN n = 2 THEN -9223372036854775808
       ELSE n * 92233720368 * (1 - 2 * (n % 2)) END,
  CASE WHEN n % 11 = 0 THEN NULL
       ELSE CAST(n AS DECIMAL(30,0)) * 1234567890123 % 1000000000000000000 / 10000 * (1 - 2 * (n % 3 = 0)) END,
  CASE WHEN n % 13 = 0 THEN NULL
       ELSE CAST(n * 1469598103 % 1099511627776 AS DOUBLE) / 1024 * (1 - 2 * (n % 5 = 0)) END,
  CASE WHEN n % 17 = 0 THEN NULL WHEN n % 17 = 1 THEN '' WHEN n % 17 = 2 THEN 'NULL'
       ELSE CONCAT(ELT(n % 8 + 1, 'café crème', '中文标签', 'party 🎉🎈', 'naïve façade', 'plain ascii',
                       'Grüße, "quoted"', '日本語テキスト', 'back\\slash \\N'), ' #', n) END,
  CASE WHEN n % 19 = 0 THEN NULL
       WHEN n % 20 = 1 THEN LEFT(REPEAT('Lorem ipsum dolor sit amet, consectetur adipiscing elit. ', 4), 200)
       WHEN n % 20 = 2 THEN CONCAT('tab\tnewline\ncr\rend ', n)
       WHEN n % 20 = 3 THEN 'NULL'
       ELSE CONCAT('event ', n, ' ', LEFT(MD5(n), 4 + n % 8)) END,
  CASE WHEN n % 23 = 0 THEN NULL ELSE n % 3 = 0 END,
  CASE WHEN n % 29 = 0 THEN NULL ELSE DATE '2000-01-01' + INTERVAL (n % 10000) DAY END,
  CASE WHEN n % 31 = 0 THEN NULL
       ELSE TIMESTAMP '2020-01-01 00:00:00' + INTERVAL n SECOND + INTERVAL (n % 1000000) MICROSECOND END,
  TIMESTAMP '2020-01-01 00:00:00' + INTERVAL (n + n % 86400) SECOND + INTERVAL (n * 7 % 1000000) MICROSECOND,
  CASE WHEN n % 37 = 0 THEN NULL
       ELSE CONCAT('{{"n": ', n, ', "tag": "', ELT(n % 4 + 1, 'é', '中', '🎉', 'x'), '"}}') END
FROM (SELECT CAST(seq AS SIGNED) AS n FROM seq_1_to_{rows}) AS s
"""


# --- touch ---------------------------------------------------------------------------------------


def touch_every(pct: float) -> int:
    if not 0 < pct <= 100:
        raise ValueError(f"`pct` must be in (0, 100], got {pct}")
    return max(1, round(100 / pct))


def touch_percent(kind: str, pct: float) -> int:
    """Change `label` and bump `updated_at` past every existing value on `pct`% of rows; returns rows changed.

    Deterministic (rows with id % (100/pct) = 0, new updated_at = 2024-01-01 + id µs), so PostgreSQL
    and MariaDB stay identical.
    """
    every = touch_every(pct)
    if kind == "pg":
        with pg(SOURCE_DB) as conn, conn.cursor() as cur:
            cur.execute(
                f"UPDATE {TABLE} SET label = 'touched #' || id,"
                f" updated_at = timestamp '{TOUCH_EPOCH}' + id * interval '1 microsecond' WHERE id % {every} = 0"
            )
            count = cur.rowcount
            cur.execute(f"VACUUM ANALYZE {TABLE}")
            return int(count)
    if kind == "mariadb":
        with mariadb(SOURCE_DB) as conn, conn.cursor() as cur:
            return int(
                cur.execute(
                    f"UPDATE {TABLE} SET label = CONCAT('touched #', id),"
                    f" updated_at = TIMESTAMP '{TOUCH_EPOCH}' + INTERVAL id MICROSECOND WHERE id % {every} = 0"
                )
            )
    raise ValueError(f"unknown source kind `{kind}`: use one of {', '.join(KINDS)}")


def source_state(kind: str) -> tuple[int, bool] | None:
    """(rows, touched) of the existing source table, or None if there is none."""
    query = f"SELECT count(*), max(updated_at) >= TIMESTAMP '{TOUCH_EPOCH}' FROM {TABLE}"
    try:
        if kind == "pg":
            with pg(SOURCE_DB) as conn, conn.cursor() as cur:
                cur.execute(query)
                count, touched = cur.fetchone()
        else:
            with mariadb(SOURCE_DB) as conn, conn.cursor() as cur:
                cur.execute(query)
                count, touched = cur.fetchone()
    except (psycopg2.Error, pymysql.Error):
        return None
    return int(count), bool(touched)


# --- checksums -----------------------------------------------------------------------------------


def _pg_canonical(name: str, logical: str, data_type: str) -> str:
    """Canonical text of column `name` (logical kind `logical`) whatever type the tool gave it in PostgreSQL."""
    if logical == "bool" and data_type == "boolean":
        value = f"{name}::int::text"
    elif logical in ("int", "decimal", "bool"):
        value = f"trim_scale({name}::numeric)::text"
    elif logical == "double":
        value = f"({name}::float8 * 1024)::text"
    elif logical == "date":
        value = f"to_char({name}::date, 'YYYY-MM-DD')"
    elif logical == "timestamp":
        value = f"to_char({name}, 'YYYY-MM-DD HH24:MI:SS.US')"
    elif logical == "json":
        value = f"{name}::jsonb::text"
    else:
        value = f"{name}::text"
    return f"coalesce({value}, '\\N')"


_MARIADB_CANONICAL = {
    "int": "CAST({c} AS CHAR)",
    "bool": "CAST({c} AS CHAR)",
    "decimal": "TRIM(TRAILING '.' FROM TRIM(TRAILING '0' FROM CAST({c} AS CHAR)))",
    "double": "CAST({c} * 1024 AS CHAR)",
    "date": "DATE_FORMAT({c}, '%Y-%m-%d')",
    "timestamp": "DATE_FORMAT({c}, '%Y-%m-%d %H:%i:%s.%f')",
    "json": "{c}",
    "text": "{c}",
}


def _pg_checksum(database: str, qualified: str) -> Checksum:
    schema, _, table = qualified.rpartition(".")
    with pg(database) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = %s AND table_name = %s",
            (schema or "public", table),
        )
        types = dict(cur.fetchall())
        missing = [name for name in COLUMN_NAMES if name not in types]
        if missing:
            raise LookupError(f"`{qualified}` in `{database}` lacks columns {missing} (has {sorted(types)})")
        row = ", ".join(_pg_canonical(name, logical, types[name]) for name, _, _, logical in COLUMNS)
        cur.execute(
            "SELECT count(*), coalesce(sum(('x' || left(md5(concat_ws(chr(31), "
            + row
            + f")), 15))::bit(60)::bigint), 0) FROM {qualified}"
        )
        count, digest = cur.fetchone()
    return Checksum(int(count), int(digest))


def _mariadb_checksum() -> Checksum:
    row = ", ".join(f"IFNULL({_MARIADB_CANONICAL[logical].format(c=name)}, '\\\\N')" for name, _, _, logical in COLUMNS)
    with mariadb(SOURCE_DB) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT COUNT(*), IFNULL(SUM(CAST(CONV(LEFT(MD5(CONCAT_WS(CHAR(31 USING utf8mb4), "
            + row
            + f")), 15), 16, 10) AS UNSIGNED)), 0) FROM {TABLE}"
        )
        count, digest = cur.fetchone()
    return Checksum(int(count), int(digest))


def source_checksum(kind: str) -> Checksum:
    """Checksum of the source table of `kind`; comparable with `target_checksum` of any copy of it."""
    if kind == "pg":
        return _pg_checksum(SOURCE_DB, f"public.{TABLE}")
    if kind == "mariadb":
        return _mariadb_checksum()
    raise ValueError(f"unknown source kind `{kind}`: use one of {', '.join(KINDS)}")


def target_checksum(table: str) -> Checksum:
    """Checksum of `schema.table` in the target database `bench_target`, over the source columns only."""
    return _pg_checksum(TARGET_DB, table)


def _main() -> None:
    parser = argparse.ArgumentParser(description="Create the JDBC bench source tables and print their checksums")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument(
        "--compare-mariadb", action="store_true", help="also time loading MariaDB through COPY | LOAD DATA"
    )
    args = parser.parse_args()
    for kind in args.kinds.split(","):
        if args.compare_mariadb and kind == "mariadb":
            seconds = create_mariadb_via_load_data(args.rows)
            print(f"mariadb via COPY | LOAD DATA: {args.rows} rows in {seconds:.1f} s, {source_checksum(kind)}")
        seconds = create_source(kind, args.rows)
        print(f"{kind}: created {args.rows} rows in {seconds:.1f} s, {source_checksum(kind)}")


if __name__ == "__main__":
    _main()
