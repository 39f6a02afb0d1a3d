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

`connect resync NAME --table T` (a signal routed to the task reading T) re-reads one table from
its beginning up to its upper bound at that moment, window by window, its position holding the
re-read (`resync`: generation, mode, `until`); its batches say so (`SourceBatch.resyncs`), and the
other tables keep their positions.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
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
    Resync,
    Signal,
    SourceBatch,
    SourceConnector,
    SourcePosition,
    SourceTask,
)
from connect_core.sdk.errors import ConfigError, ConflictError, FatalError
from connect_core.sdk.records import driver_max_rows, keyed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["JdbcSourceConnector", "JdbcSourceTask"]

#: Below this many ids a window is read in one piece.
SPLIT_MIN_IDS = 50_000
#: The key of a table's position holding its re-read under way (`connect resync`).
RESYNC = "resync"
#: How a re-read's rows replace the target's (`Resync.mode`).
RESYNC_MODES = ("retain", "replace")


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
        resyncs: dict[str, Resync] = {}
        masks = cfg.column_masks()
        asked = _resync_requests(cfg, self.context.signals, self.log)
        for source in _sources(cfg, jdbc):
            window = _Window(cfg, jdbc, source)
            last = positions.offset(source.key)
            if source.key.get("table") in asked or (last or {}).get(RESYNC):
                generation = self.context.resync_generations.get(source.topic, 0) + 1
                df, offset, mark = window.resync(last, asked.get(source.key.get("table", "")), generation, self.log)
                if mark is not None:
                    resyncs[source.topic] = mark
            else:
                df, offset = window.read(last)
            if df is None:
                if offset is not None:  # a re-read that ended with no rows moves the position all the same
                    reached.append(SourcePosition(source.key, offset))
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
        return SourceBatch(records, tuple(reached), resyncs=resyncs)

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
        if _resync_requests(cfg, self.context.signals, self.log) or any(
            (positions.offset(s.key) or {}).get(RESYNC) for s in _sources(cfg, jdbc)
        ):
            return True  # a re-read asked for, or under way (its end is a run's work even with no rows)
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


def _resync_requests(cfg: JdbcSourceConfig, signals: Sequence[Signal], log: Any) -> dict[str, str]:
    """The tables of this task a signal asks to re-read (`execute-snapshot`, as `connect resync` sends
    it), by their `table.whitelist` name, with the mode (`resync-mode`; Debezium's signal: `retain`).
    Other signals are consumed with a note: a JDBC source has no snapshot to stop, pause or resume."""
    asked: dict[str, str] = {}
    for signal in signals:
        if signal.type != "execute-snapshot" or cfg.query:
            log.info("signal %s (%s) ignored: a JDBC source re-reads tables only", signal.id, signal.type)
            continue
        mode = str(signal.data.get("resync-mode", "retain"))
        for name in signal.data.get("data-collections") or []:
            table = _whitelisted(cfg, str(name))
            if table is not None:
                asked[table] = mode if mode in RESYNC_MODES else "retain"
    return asked


def _whitelisted(cfg: JdbcSourceConfig, name: str) -> str | None:
    """The `table.whitelist` entry naming table `name` (as written there, or as the same identifier)."""
    if name in cfg.table_whitelist:
        return name
    try:
        wanted = parse_identifier(name, "table")
    except ConfigError:
        return None
    return next((t for t in cfg.table_whitelist if parse_identifier(t, "table") == wanted), None)


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

    def resync(
        self, last: Any, asked: str | None, generation: int, log: Any
    ) -> tuple[DataFrame | ArrowRecords | None, dict[str, Any] | None, Resync | None]:
        """The next window of the table's re-read (`connect resync`): begun now when `asked` (its mode),
        else the one under way in `last` (its position's `resync` entry: generation, mode, and `until`,
        the table's upper bound when it began). The rows up to `until` are read from the beginning,
        window by window; the position holds the re-read's cursor; the window that reaches `until` ends
        it and the table's reading goes on from there. Bulk mode: this run's read is the re-read."""
        running = dict((last or {}).get(RESYNC) or {})
        begins = not running
        if running and asked:
            log.warning(
                "%s: a re-read (generation %s) is under way; the new request is ignored",
                self.source.topic,
                running.get("generation"),
            )
        if self.cfg.mode == "bulk":
            df, offset = self.read(last)
            return df, offset, Resync(generation, asked or "retain", begins=True, ends=True)
        if begins:
            columns = self.columns = self._columns()
            until = self.bounds({}, columns, limited=False)[1]
            running = {"generation": generation, "mode": asked, "until": until}
            cursor: dict[str, Any] = {}
            log.info(
                "%s: re-reading the table (generation %s, %s) up to %s", self.source.topic, generation, asked, until
            )
        else:
            cursor = {k: v for k, v in last.items() if k != RESYNC}
        mode, until = str(running["mode"]), running["until"]
        if until is None:  # an empty table: the re-read begins and ends with no rows
            return None, dict(cursor) or None, Resync(int(running["generation"]), mode, begins=begins, ends=True)
        df, offset = self.read(cursor, cap=until)
        if df is None or offset == until:  # the end: rows up to `until` all read (some maybe deleted since)
            return df, dict(until), Resync(int(running["generation"]), mode, begins=begins, ends=True)
        return df, {**(offset or {}), RESYNC: running}, Resync(int(running["generation"]), mode, begins=begins)

    def read(
        self, last: Any, cap: dict[str, Any] | None = None
    ) -> tuple[DataFrame | ArrowRecords | None, dict[str, Any] | None]:
        """The window past `last` (at most up to `cap`, a position) and the position at its end."""
        columns = self.columns = self._columns()
        select = ", ".join(
            f"{self.dialect.text_cast(self.q(c.name))} AS {self.q(c.name)}" if c.as_text else self.q(c.name)
            for c in columns
        )
        where, offset = self.bounds(last, columns, cap=cap)
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

    def bounds(
        self,
        last: Any,
        columns: list[Column] | None = None,
        *,
        cap: dict[str, Any] | None = None,
        limited: bool = True,
    ) -> tuple[list[str] | None, dict[str, Any] | None]:
        """The window past `last` (its predicates, None if nothing new) and the position at its end: at
        most up to the position `cap`, of at most `batch.max.rows` rows unless not `limited`."""
        if self.cfg.mode == "bulk":
            return [], None
        limit = self.cfg.batch_max_rows if limited else None
        if self.cfg.mode == "incrementing":
            return self._incrementing(last or {}, cap, limit)
        return self._timestamp(last or {}, columns if columns is not None else self._columns(), cap, limit)

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

    def _incrementing(
        self, last: dict[str, Any], cap: dict[str, Any] | None, limit: int | None
    ) -> tuple[list[str] | None, dict[str, Any] | None]:
        assert self.inc is not None
        after = [f"{self.inc} > {_number(last['incrementing'])}"] if "incrementing" in last else []
        upto = [f"{self.inc} <= {_number(cap['incrementing'])}"] if cap else []
        where = " AND ".join([*after, *upto]) or "1=1"
        if limit:
            inner = f"SELECT {self.inc} AS v FROM {self.source.relation} WHERE {where} ORDER BY {self.inc}"
            sql = f"SELECT MAX(v) AS hi FROM ({inner}{self.dialect.limit(limit)}) b"
        else:
            sql = f"SELECT MAX({self.inc}) AS hi FROM {self.source.relation} WHERE {where}"
        (row,) = self.jdbc.rows(sql, f"finding new rows of {self.source.topic}")
        if row["hi"] is None:
            return None, None
        hi = _stored(row["hi"])
        return [*after, f"{self.inc} <= {_number(hi)}"], {"incrementing": hi}

    def _timestamp(
        self, last: dict[str, Any], columns: list[Column], cap: dict[str, Any] | None, limit: int | None
    ) -> tuple[list[str] | None, dict[str, Any] | None]:
        assert self.ts is not None
        ts_type = next(c.sql_type for c in columns if c.name == self.cfg.timestamp_column_name)
        cut = f"{self.ts} < {self.dialect.now_minus(self.cfg.timestamp_delay_interval_ms, ts_type)}"
        after = self._after(last) + self._upto(cap)
        where = " AND ".join([*after, cut])
        order = [self.ts, *([self.inc] if self.inc else [])]
        fields = f"{self.dialect.timestamp_text(self.ts)} AS t" + (f", {self.inc} AS i" if self.inc else "")
        desc = ", ".join(f"{o} DESC" for o in order)
        if limit:
            inner = (
                f"SELECT {self.ts}, {self.inc or self.ts} AS connect_i FROM {self.source.relation} WHERE {where} "
                f"ORDER BY {', '.join(order)}{self.dialect.limit(limit)}"
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

    def _upto(self, cap: dict[str, Any] | None) -> list[str]:
        """The predicate of rows at or before the position `cap` (a re-read's `until`)."""
        if not cap or "timestamp" not in cap:
            return []
        ts = f"TIMESTAMP '{_timestamp(cap['timestamp'])}'"
        if self.inc and "incrementing" in cap:
            return [f"({self.ts} < {ts} OR ({self.ts} = {ts} AND {self.inc} <= {_number(cap['incrementing'])}))"]
        return [f"{self.ts} <= {ts}"]

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
    accepts_signals = True  # `connect resync`: re-read one table

    def signal_task(self, config: JdbcSourceConfig, task_configs: Sequence[Mapping[str, Any]], signal: Signal) -> int:
        """The task reading the first table the signal names (tasks split the tables); task 0 otherwise."""
        for name in signal.data.get("data-collections") or []:
            table = _whitelisted(config, str(name))
            for task_id, task_config in enumerate(task_configs):
                if table is not None and table in (task_config.get("table.whitelist") or []):
                    return task_id
        return 0

    def check_signal(self, config: JdbcSourceConfig, signal: Signal) -> None:
        """A signal sent over REST (not `connect resync`, which checks its own): an `execute-snapshot`
        of tables the connector reads, re-read in `retain` mode; a JDBC source has no snapshot to
        pause or stop, and a `replace` goes through `connect resync`, which asks the sinks first."""
        if signal.type != "execute-snapshot":
            raise ConfigError(
                f"a JDBC source acts on `execute-snapshot` only (a re-read), not `{signal.type}`",
                {"type": ["must be execute-snapshot"]},
            )
        if signal.data.get("resync-mode", "retain") != "retain":
            raise ConfigError(
                "a `replace` re-read is asked with `connect resync NAME --table T --mode replace` "
                "(POST /connectors/{name}/resync), which checks that the sinks can take it",
                {"data.resync-mode": ["only `retain` here"]},
            )
        unknown = [str(t) for t in signal.data.get("data-collections") or [] if _whitelisted(config, str(t)) is None]
        if unknown:
            known = ", ".join(config.table_whitelist) or "none (it reads a query)"
            raise ConfigError(
                f"the connector reads no table {', '.join(f'`{t}`' for t in unknown)}; it reads: {known}",
                {"data.data-collections": [f"one of {known}"]},
            )

    def check_resync(self, config: JdbcSourceConfig, table: str, positions: Positions) -> str:
        if config.query:
            raise ConfigError(
                "the connector reads a `query`, not tables: a re-read needs `table.whitelist`",
                {"table": ["the connector reads a query"]},
            )
        found = _whitelisted(config, table)
        if found is None:
            known = ", ".join(config.table_whitelist)
            raise ConfigError(
                f"the connector reads no table `{table}`; it reads: {known}", {"table": [f"one of {known}"]}
            )
        running = (positions.offset({"table": found}) or {}).get(RESYNC)
        if running:
            raise ConflictError(
                f"a re-read of `{found}` (generation {running.get('generation')}) is under way; "
                "wait for it to end, then ask again"
            )
        return found

    def resync_topic(self, config: JdbcSourceConfig, table: str) -> str | None:
        return config.topic_prefix + parse_identifier(table, "table")[-1]

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
