"""JdbcSourceConnector: tables (or a query) into topics, in Kafka's JDBC source modes.

Each run reads one bounded window per table and commits the position at its
end, per table as Kafka does (`{"table": T}` → `{"incrementing": …, "timestamp": …}`):

* `bulk`: the whole table, every run.
* `incrementing`: rows with `id > last`, up to the largest id now (or the
  `batch.max.rows`-th).
* `timestamp`: rows with `last < ts <= upper`, where `upper` is the newest
  timestamp older than `timestamp.delay.interval.ms` (late commits within the
  delay are not missed).
* `timestamp+incrementing`: ordered by `(ts, id)`, so rows sharing a timestamp
  are neither lost nor read twice.

The window's bounds come from one small query; the rows are read by Spark in
parallel slices of the incrementing column (`snapshot.partitions`), never
through the driver. Column types travel with the topic (field metadata
`connect.sql.type`), so a sink can create the same types.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from connect_core.connectors._masks import ColumnMasks, masked_frame, masked_records
from connect_core.connectors.jdbc._jdbc import Column, Jdbc, jdbc_errors
from connect_core.connectors.jdbc.config import JdbcSourceConfig
from connect_core.connectors.jdbc.dialects import driver_jars, lineage_datasets, parse_identifier
from connect_core.sdk import (
    DRIVER_MAX_ROWS,
    ArrowRecords,
    LineageDataset,
    Positions,
    SourceBatch,
    SourceConnector,
    SourcePosition,
    SourceTask,
)
from connect_core.sdk.errors import ConfigError, FatalError
from connect_core.sdk.records import driver_max_rows, keyed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["JdbcSourceConnector", "JdbcSourceTask"]

#: Below this many ids a window is read in one piece.
SPLIT_MIN_IDS = 50_000


@dataclass
class _Source:
    """One table (or the query) of a task."""

    key: dict[str, str]  # the source partition: {"table": …} or {"query": …}
    topic: str
    relation: str  # what goes after FROM
    table: tuple[str, ...] | None


class JdbcSourceTask(SourceTask):
    def read(self, spark: SparkSession, positions: Positions) -> SourceBatch:
        cfg = JdbcSourceConfig.model_validate(self.config)
        jdbc = Jdbc(spark, cfg)
        records: dict[str, DataFrame | ArrowRecords] = {}
        reached: list[SourcePosition] = []
        masks = cfg.column_masks()
        for source in _sources(cfg, jdbc):
            window = _Window(cfg, jdbc, source)
            df, offset = window.read(positions.offset(source.key))
            if df is None:
                if masks:  # nothing new, but its columns were read: a rule naming one of them names something
                    masks.for_columns(_mask_tables(jdbc, source), [c.name for c in window.columns])
                continue
            how = "Spark's JDBC reader"
            if isinstance(df, ArrowRecords):
                how = jdbc.dialect.bulk_reader
                how += " in the driver" if df.in_driver else f" in {len(df.units)} Spark partition(s)"
            self.log.info("%s: reading the window through %s", source.topic, how)
            key = list(cfg.key_fields) or (jdbc.primary_key(source.table) if source.table is not None else [])
            df = self._masked(masks, jdbc, source, df, key)
            records[source.topic] = keyed(df, key) if key else df
            if offset is not None:
                reached.append(SourcePosition(source.key, offset))
        masks.warn_unmatched(self.log)
        return SourceBatch(records, tuple(reached))

    def _masked(
        self, masks: ColumnMasks, jdbc: Jdbc, source: _Source, df: DataFrame | ArrowRecords, key: list[str]
    ) -> DataFrame | ArrowRecords:
        """`df` with the columns the column masks name hidden, before the key is taken from them (so
        neither the value nor the key holds what they hide)."""
        if not masks:
            return df
        columns = df.schema.fieldNames() if isinstance(df, ArrowRecords) else df.columns
        rules = masks.for_columns(_mask_tables(jdbc, source), columns, key)
        if not rules:
            return df
        self.log.info("%s: hiding %s", source.topic, ", ".join(f"`{c}` ({r.shown})" for c, r in sorted(rules.items())))
        return masked_records(df, rules) if isinstance(df, ArrowRecords) else masked_frame(df, rules)

    def has_new_data(self, positions: Positions) -> bool | None:
        """Whether a run would read anything: the same bound queries as `read`, without Spark
        (bulk mode always reads; None — run and see — when the check itself fails)."""
        cfg = JdbcSourceConfig.model_validate(self.config)
        jdbc = Jdbc(None, cfg)
        if cfg.mode == "bulk":
            return True
        if cfg.query and not jdbc.dialect.describes_queries and cfg.mode != "incrementing":
            return None  # a query's timestamp column type comes from Spark's JDBC reader
        try:
            return any(
                _Window(cfg, jdbc, s).bounds(positions.offset(s.key))[0] is not None for s in _sources(cfg, jdbc)
            )
        except (ConfigError, FatalError):
            raise  # a refused login, a missing table: the run would fail the same way, after Spark
        except Exception as exc:  # the run reports it, with its context
            self.log.info("cannot tell whether there is anything new (%s); running", exc)
            return None


def _mask_tables(jdbc: Jdbc, source: _Source) -> list[str]:
    """The names column masks know a source's table by (`<table>.<column>` for each)."""
    if source.table is None:
        return [source.topic]  # a query's columns have no table: the topic stands for it
    return list(dict.fromkeys([jdbc.dialect.qualified_table(source.table), ".".join(source.table)]))


def _sources(cfg: JdbcSourceConfig, jdbc: Jdbc) -> list[_Source]:
    if cfg.query:
        return [_Source({"query": "query"}, cfg.topic_prefix, f"({cfg.query}) connect_src", None)]
    found = []
    for name in cfg.table_whitelist:
        parts = parse_identifier(name, "table")
        found.append(_Source({"table": name}, cfg.topic_prefix + parts[-1], jdbc.dialect.quote(parts), parts))
    return found


class _Window:
    """The rows of one source between its committed position and now."""

    def __init__(self, cfg: JdbcSourceConfig, jdbc: Jdbc, source: _Source) -> None:
        self.cfg, self.jdbc, self.source = cfg, jdbc, source
        self.dialect = jdbc.dialect
        self.q = jdbc.dialect.quote
        self.inc = self.q(cfg.incrementing_column_name) if cfg.incrementing_column_name else None
        self.ts = self.q(cfg.timestamp_column_name) if cfg.timestamp_column_name else None
        self.columns: list[Column] = []  # the source's columns, once `read` has asked for them

    def read(self, last: Any) -> tuple[DataFrame | ArrowRecords | None, dict[str, Any] | None]:
        columns = self.columns = self._columns()
        select = ", ".join(
            f"{self.dialect.text_cast(self.q(c.name))} AS {self.q(c.name)}" if c.as_text else self.q(c.name)
            for c in columns
        )
        where, offset = self.bounds(last, columns)
        if where is None:
            return None, None  # nothing new
        base = " AND ".join(where) or "1=1"
        sql = f"SELECT {select} FROM {self.source.relation} WHERE {base}"
        with jdbc_errors(self.jdbc.dialect, f"reading {self.source.topic}"):
            in_driver = driver_max_rows(self.jdbc.spark)
            small = self._at_most(base, in_driver)
            slices = None if small else self._slices(base)
            arrow = self.jdbc.arrow_read(sql, slices, columns, in_driver=small)
            if arrow is not None:
                return arrow, offset
            if small and in_driver > DRIVER_MAX_ROWS and not self._at_most(base, DRIVER_MAX_ROWS):
                slices = self._slices(base)  # Spark's JDBC reader splits what its driver would read alone
            df = self.jdbc.read(sql, slices)
            df = df.select(*[df[c.name].alias(c.name, metadata=c.metadata()) for c in columns])
        return df, offset

    def bounds(self, last: Any, columns: list[Column] | None = None) -> tuple[list[str] | None, dict[str, Any] | None]:
        """The window past `last` (its predicates, None if nothing new) and the position at its end."""
        if self.cfg.mode == "bulk":
            return [], None
        if self.cfg.mode == "incrementing":
            return self._incrementing(last or {})
        return self._timestamp(last or {}, columns if columns is not None else self._columns())

    def _columns(self) -> list[Column]:
        if self.source.table is not None:
            columns = self.jdbc.columns(self.source.table)
        else:
            with jdbc_errors(self.jdbc.dialect, "reading the query's columns"):
                schema = self.jdbc.schema(f"SELECT * FROM {self.source.relation}")
                if schema is None:  # a type only Spark's JDBC reader knows
                    schema = self.jdbc.read(f"SELECT * FROM {self.source.relation} WHERE 1=0").schema
            columns = [Column(f.name, f.dataType.simpleString()) for f in schema.fields]
        names = {c.name for c in columns}
        for key, column in (
            ("incrementing.column.name", self.cfg.incrementing_column_name),
            ("timestamp.column.name", self.cfg.timestamp_column_name),
        ):
            if column and column not in names:
                where = f"table `{'.'.join(self.source.table)}`" if self.source.table else "the query"
                raise ConfigError(f"{where} has no column `{column}` (`{key}`)", {key: [f"no column `{column}`"]})
        return columns

    def _incrementing(self, last: dict[str, Any]) -> tuple[list[str] | None, dict[str, Any] | None]:
        assert self.inc is not None
        after = [f"{self.inc} > {_number(last['incrementing'])}"] if "incrementing" in last else []
        where = " AND ".join(after) or "1=1"
        if self.cfg.batch_max_rows:
            inner = f"SELECT {self.inc} AS v FROM {self.source.relation} WHERE {where} ORDER BY {self.inc}"
            sql = f"SELECT MAX(v) AS hi FROM ({inner}{self.dialect.limit(self.cfg.batch_max_rows)}) b"
        else:
            sql = f"SELECT MAX({self.inc}) AS hi FROM {self.source.relation} WHERE {where}"
        (row,) = self.jdbc.rows(sql, f"finding new rows of {self.source.topic}")
        if row["hi"] is None:
            return None, None
        hi = _stored(row["hi"])
        return [*after, f"{self.inc} <= {_number(hi)}"], {"incrementing": hi}

    def _timestamp(self, last: dict[str, Any], columns: list[Column]) -> tuple[list[str] | None, dict[str, Any] | None]:
        assert self.ts is not None
        ts_type = next(c.sql_type for c in columns if c.name == self.cfg.timestamp_column_name)
        cut = f"{self.ts} < {self.dialect.now_minus(self.cfg.timestamp_delay_interval_ms, ts_type)}"
        after = self._after(last)
        where = " AND ".join([*after, cut])
        order = [self.ts, *([self.inc] if self.inc else [])]
        fields = f"{self.dialect.timestamp_text(self.ts)} AS t" + (f", {self.inc} AS i" if self.inc else "")
        desc = ", ".join(f"{o} DESC" for o in order)
        if self.cfg.batch_max_rows:
            inner = (
                f"SELECT {self.ts}, {self.inc or self.ts} AS connect_i FROM {self.source.relation} WHERE {where} "
                f"ORDER BY {', '.join(order)}{self.dialect.limit(self.cfg.batch_max_rows)}"
            )
            fields = f"{self.dialect.timestamp_text(self.ts)} AS t" + (", connect_i AS i" if self.inc else "")
            desc = f"{self.ts} DESC" + (", connect_i DESC" if self.inc else "")
            sql = f"SELECT {fields} FROM ({inner}) b ORDER BY {desc}{self.dialect.limit(1)}"
        else:
            sql = f"SELECT {fields} FROM {self.source.relation} WHERE {where} ORDER BY {desc}{self.dialect.limit(1)}"
        rows = self.jdbc.rows(sql, f"finding new rows of {self.source.topic}")
        if not rows:
            return None, None
        upper_ts = rows[0]["t"]
        upper = f"{self.ts} <= TIMESTAMP '{_timestamp(upper_ts)}'"
        offset: dict[str, Any] = {"timestamp": upper_ts}
        if self.inc:
            upper_inc = _stored(rows[0]["i"])
            upper = (
                f"({self.ts} < TIMESTAMP '{_timestamp(upper_ts)}' OR "
                f"({self.ts} = TIMESTAMP '{_timestamp(upper_ts)}' AND {self.inc} <= {_number(upper_inc)}))"
            )
            offset["incrementing"] = upper_inc
        return [*after, upper], offset

    def _after(self, last: dict[str, Any]) -> list[str]:
        if "timestamp" not in last:
            return []
        ts = f"TIMESTAMP '{_timestamp(last['timestamp'])}'"
        if self.inc and "incrementing" in last:
            return [f"({self.ts} > {ts} OR ({self.ts} = {ts} AND {self.inc} > {_number(last['incrementing'])}))"]
        return [f"{self.ts} > {ts}"]

    def _at_most(self, where: str, rows: int) -> bool:
        """Whether the window holds at most `rows` rows: a count that stops after `rows` + 1 (an
        incremental window is read by its index; cost bounded however big the window is)."""
        (found,) = self.jdbc.rows(
            f"SELECT COUNT(*) AS n FROM (SELECT 1 AS one FROM {self.source.relation} WHERE {where}"
            f"{self.dialect.limit(rows + 1)}) connect_n",
            f"sizing {self.source.topic}",
        )
        return int(found["n"]) <= rows

    def _slices(self, where: str) -> list[str] | None:
        """Predicates splitting the window on the incrementing column (bounds from one query)."""
        if not self.inc or self.cfg.snapshot_partitions < 2:
            return None
        # The first and last id by walking the key's index from either end (MIN/MAX under a filter on
        # another column scans the whole table in MariaDB).
        ends = [
            self.jdbc.rows(
                f"SELECT {self.inc} AS v FROM {self.source.relation} WHERE {where} "
                f"ORDER BY {self.inc}{order}{self.dialect.limit(1)}",
                f"sizing {self.source.topic}",
            )
            for order in ("", " DESC")
        ]
        lo: Any = ends[0][0]["v"] if ends[0] else None
        hi: Any = ends[1][0]["v"] if ends[1] else None
        if lo is None or not _integral(lo) or not _integral(hi) or int(hi) - int(lo) < SPLIT_MIN_IDS:
            return None
        lo, hi = int(lo), int(hi)
        step = math.ceil((hi - lo + 1) / self.cfg.snapshot_partitions)
        bounds = [lo + i * step for i in range(self.cfg.snapshot_partitions)] + [hi + 1]
        return [f"{where} AND {self.inc} >= {a} AND {self.inc} < {b}" for a, b in itertools.pairwise(bounds)]


def _integral(value: Any) -> bool:
    return isinstance(value, int) or (isinstance(value, Decimal) and value == value.to_integral_value())


def _stored(value: Any) -> int | str:
    """A position value as JSON keeps it exactly: ints, else decimal text."""
    if isinstance(value, int):
        return value
    if isinstance(value, Decimal) and value == value.to_integral_value():
        return int(value)
    return str(value)


def _number(value: Any) -> str:
    """A stored numeric position as a SQL literal (it came from the database; checked anyway)."""
    text = str(value)
    Decimal(text)  # raises on anything that is not a number
    if not text.lstrip("-").replace(".", "", 1).isdigit():
        raise ConfigError(f"stored position `{text}` is not a number")
    return text


def _timestamp(value: Any) -> str:
    """A stored timestamp position, checked to be `YYYY-MM-DD HH:MM:SS[.ffffff]` before it enters SQL."""
    from datetime import datetime

    text = str(value)
    datetime.strptime(text[:26], "%Y-%m-%d %H:%M:%S.%f" if "." in text else "%Y-%m-%d %H:%M:%S")
    return text


class JdbcSourceConnector(SourceConnector[JdbcSourceConfig]):
    config_model = JdbcSourceConfig
    task_class = JdbcSourceTask

    def task_configs(self, config: JdbcSourceConfig, max_tasks: int) -> list[dict[str, Any]]:
        base = config.model_dump(by_alias=True, exclude_none=True, exclude={"name", "tasks_max"})
        if config.query:
            return [base]
        tables = config.table_whitelist
        groups = [tables[i::max_tasks] for i in range(min(max_tasks, len(tables)))]
        return [{**base, "table.whitelist": group} for group in groups]

    def lineage(self, config: JdbcSourceConfig) -> list[LineageDataset]:
        return lineage_datasets(config.connection_url, list(config.table_whitelist))

    def output_topics(self, config: JdbcSourceConfig) -> list[str]:
        if config.query:
            return [config.topic_prefix]
        return [config.topic_prefix + parse_identifier(t, "table")[-1] for t in config.table_whitelist]

    def spark_conf(self, config: JdbcSourceConfig) -> dict[str, str]:
        # `connection.jar` is a `DriverJar`: the runtime hands it here checked, as its real path.
        return {"spark.jars": ",".join(driver_jars(config.connection_url, config.connection_jar))}
