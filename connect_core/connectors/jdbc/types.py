"""Column types on the way into PostgreSQL: the source's own type when it travelled with the topic
(field metadata `connect.sql.type`), else the Spark type's natural PostgreSQL type.

| source (MariaDB / PostgreSQL)            | Spark / topic          | PostgreSQL target        |
|------------------------------------------|------------------------|--------------------------|
| TINYINT, SMALLINT / smallint             | byte, short            | smallint                 |
| MEDIUMINT, INT / integer                 | int                    | integer                  |
| BIGINT, INT UNSIGNED / bigint            | long                   | bigint                   |
| BIGINT UNSIGNED                          | decimal(20,0)          | numeric(20,0)            |
| DECIMAL(p,s) / numeric(p,s)              | decimal(p,s)           | numeric(p,s)             |
| FLOAT / real                             | float                  | real                     |
| DOUBLE / double precision                | double                 | double precision         |
| CHAR, VARCHAR, TEXT / text, varchar      | string                 | text                     |
| JSON (MariaDB: LONGTEXT) / json, jsonb   | string                 | text / json, jsonb       |
| BOOLEAN, TINYINT(1) / boolean            | boolean                | boolean                  |
| DATE / date                              | date                   | date                     |
| DATETIME(6) / timestamp                  | timestamp_ntz          | timestamp(6)             |
| TIMESTAMP / timestamptz                  | timestamp (UTC)        | timestamptz(6)           |
| TIME(6) / time                           | string (exact text)    | time(6)                  |
| BLOB, VARBINARY / bytea                  | binary                 | bytea                    |
| PostgreSQL uuid, interval, inet, …       | string (exact text)    | the same type            |
"""

from __future__ import annotations

from typing import Any

from connect_core.sdk.errors import ConfigError

__all__ = ["mariadb_type", "postgres_type"]

# Source types kept as they are when the target is PostgreSQL (from a PostgreSQL source, or TIME).
_KEEP = {
    "json": "json",
    "jsonb": "jsonb",
    "uuid": "uuid",
    "interval": "interval",
    "inet": "inet",
    "cidr": "cidr",
    "macaddr": "macaddr",
    "xml": "xml",
    "money": "money",
    "time": "time(6)",
    "time without time zone": "time(6)",
    "time with time zone": "timetz(6)",
}

_BY_SPARK = {
    "byte": "smallint",
    "short": "smallint",
    "integer": "integer",
    "long": "bigint",
    "float": "real",
    "double": "double precision",
    "string": "text",
    "boolean": "boolean",
    "date": "date",
    "timestamp_ntz": "timestamp(6)",
    "timestamp": "timestamptz(6)",
    "binary": "bytea",
}


def postgres_type(field: Any) -> str:
    """The PostgreSQL column type for a Spark `StructField` of a topic."""
    source = str(field.metadata.get("connect.sql.type", "")).lower()
    if source in _KEEP:
        return _KEEP[source]
    spark = field.dataType.typeName()
    if spark == "decimal":
        return f"numeric({field.dataType.precision},{field.dataType.scale})"
    if spark in _BY_SPARK:
        return _BY_SPARK[spark]
    raise ConfigError(
        f"column `{field.name}` has type {field.dataType.simpleString()}, which the JDBC sink cannot map "
        "to a PostgreSQL column"
    )


# MariaDB/MySQL: a string or binary key column needs a bounded type (an index has a length limit).
_MARIADB_BY_SPARK = {
    "byte": "TINYINT",
    "short": "SMALLINT",
    "integer": "INT",
    "long": "BIGINT",
    "float": "FLOAT",
    "double": "DOUBLE",
    "string": "LONGTEXT",
    "boolean": "BOOLEAN",
    "date": "DATE",
    "timestamp_ntz": "DATETIME(6)",
    "timestamp": "DATETIME(6)",  # UTC (the sink's session time zone); TIMESTAMP would stop at 2038
    "binary": "LONGBLOB",
}
_MARIADB_KEYS = {"string": "VARCHAR(255)", "binary": "VARBINARY(255)"}
_MARIADB_KEEP = {"json": "JSON", "jsonb": "JSON", "time": "TIME(6)", "time without time zone": "TIME(6)"}


def mariadb_type(field: Any, *, key: bool = False) -> str:
    """The MariaDB/MySQL column type for a Spark `StructField` of a topic (`key`: in the primary key)."""
    spark = field.dataType.typeName()
    if key and spark in _MARIADB_KEYS:
        return _MARIADB_KEYS[spark]
    source = str(field.metadata.get("connect.sql.type", "")).lower()
    if source in _MARIADB_KEEP and spark == "string":
        return _MARIADB_KEEP[source]
    if spark == "decimal":
        if field.dataType.precision > 65:
            raise ConfigError(f"column `{field.name}`: DECIMAL({field.dataType.precision}) exceeds MariaDB's 65 digits")
        return f"DECIMAL({field.dataType.precision},{field.dataType.scale})"
    if spark in _MARIADB_BY_SPARK:
        return _MARIADB_BY_SPARK[spark]
    raise ConfigError(
        f"column `{field.name}` has type {field.dataType.simpleString()}, which the JDBC sink cannot map "
        "to a MariaDB column"
    )
