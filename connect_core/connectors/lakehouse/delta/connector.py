"""DeltaSinkConnector: topics into Delta tables through delta-rs (`deltalake`), exactly once.

A run finds each topic's table (`_tables`). An append to a local table is written where the
records are read: Spark's Python workers write the data files (`_spread`, `_write.FileWriter`; the
driver itself for a small batch), the driver commits them. Upserts and deletes (and tables on S3)
take the topic's new records as Arrow in the driver (`_changes`: the newest change per key,
merged). Either way a table gets one Delta commit per run: its rows and, as application
transactions, the topic offsets it has reached (`_offsets`). The runtime then commits the same offsets in its fenced Postgres commit. A run killed
between the two commits is repaired by the next: each table's app transactions say which of the
redelivered records it already holds, and those are skipped.

One task writes all partitions (`tasks.max` is capped at 1, as the Iceberg sink): two tasks
committing to one table would race for it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from connect_core.connectors._resync import may_route
from connect_core.connectors.lakehouse import _changes, _spread
from connect_core.connectors.lakehouse._upkeep import each_table
from connect_core.connectors.lakehouse.delta import _offsets, _replace, _schema, _upkeep, _write
from connect_core.connectors.lakehouse.delta._tables import Location, checked, locate
from connect_core.connectors.lakehouse.delta.config import TOPIC, DeltaSinkConfig, problems
from connect_core.sdk import WRITE_TABLES, LineageDataset, SinkBatch, SinkConnector, SinkTask, Upkeep
from connect_core.sdk.config import is_placeholder
from connect_core.sdk.errors import ConfigError
from connect_core.sdk.records import ArrowRecords, CommittedOffset, TopicPartition

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from pyspark.sql import SparkSession

__all__ = ["DeltaSinkConnector", "DeltaSinkTask"]

_LOG = logging.getLogger(__name__)


class DeltaSinkTask(SinkTask):
    def open(self, committed: Mapping[TopicPartition, CommittedOffset]) -> Mapping[str, Any] | None:
        self.cfg = checked(DeltaSinkConfig.model_validate(dict(self.config)))
        #: (table URI, topic) → the next offset of each partition the table holds, read at first use
        #: in the run (a router may send a topic's records to a table known only from the batch)
        self.held: dict[tuple[str, str], dict[int, int]] = {}
        return None

    def write(self, spark: SparkSession, batch: SinkBatch) -> Mapping[str, Any] | None:
        self._refuse_merged(batch)
        written = deleted = 0
        self.changes = batch.schema_changes  # topic → how its columns changed (`schema.propagation`)
        #: table URI → its version after this run's commits, and the data files and bytes they added
        self.versions: dict[str, int] = {}
        self.added = [0, 0]
        for topic in batch.read_topics():
            where = self._replica(batch, topic)
            partitions = [tp.partition for tp in batch.partitions if tp.topic == topic]
            records = batch.arrow(topic)
            if records is not None and not self.cfg.upserts and where.local:
                # an append to a local table: the workers write the data files (`_spread`)
                _changes.refuse_envelope(topic, _spread.empty(records), "delta.tables.cdc-field")
                w, d = self._append(where, topic, records, partitions), 0
            else:
                rows = self._rows(batch, topic)
                _changes.refuse_envelope(topic, rows, "delta.tables.cdc-field")
                w, d = self._write_table(where, topic, rows, partitions)
            written, deleted = written + w, deleted + d
        self._swap_ended(batch)
        return {
            "rows_written": written,
            "keys_deleted": deleted,
            "files_written": self.added[0],
            "bytes_written": self.added[1],
            WRITE_TABLES: [{"name": uri, "version": str(v)} for uri, v in sorted(self.versions.items())],
        }

    def _replica(self, batch: SinkBatch, topic: str) -> Location:
        """The table the batch's rows of `topic` go to: its `replace` re-read's copy, or itself."""
        where = locate(self.cfg, batch.destination(topic))
        resync = batch.replacing.get(topic)
        if resync is None:
            return where
        return _replace.replica(where, self.context.connector, topic, resync.generation)

    def _refuse_merged(self, batch: SinkBatch) -> None:
        """A ConfigError, before anything is written, when a `replace` re-read's table also takes
        other topics' rows, by the config or in this batch: the swap would drop them."""
        for topic in sorted(batch.replacing):
            problem = _replace.problem(self.cfg, topic, may_route(self.cfg))
            if problem is None and topic in batch.read_topics():
                uri = locate(self.cfg, batch.destination(topic)).uri
                shared = [
                    t for t in batch.read_topics() if t != topic and locate(self.cfg, batch.destination(t)).uri == uri
                ]
                if shared:
                    problem = f"the rows of topics {', '.join(shared)} go to table {uri} too"
            if problem is not None:
                raise ConfigError(f"{problem}: re-read `{topic}` with `--mode retain`")

    def _swap_ended(self, batch: SinkBatch) -> None:
        """Swap in the copies of the `replace` re-reads this batch ends (after their last rows): in
        the table the topic's records name, when the batch carries their routes or no transform may
        route them; else nothing is swapped, with a warning (a batch that ends a re-read with no rows
        carries no routes, and the raw topic's table may be another)."""
        for topic, resync in sorted(batch.replacing.items()):
            if not resync.ends:
                continue
            if topic not in batch.routes and TOPIC in self.cfg.location and may_route(self.cfg):
                _LOG.warning(
                    "%s: re-read %d ended in a batch without its routes, and the sink's transforms may route the "
                    "topic: its table is not known, so nothing was swapped (send the re-read again)",
                    topic,
                    resync.generation,
                )
                continue
            where = locate(self.cfg, batch.destination(topic))
            started = time.monotonic()
            if _replace.swap_in(where, self.context.connector, topic, resync.generation):
                self.held.pop((where.uri, topic), None)
                self._committed(where, None, [])
                self.log.info(
                    "Delta table %s: re-read %d of %s swapped in in %.1f s",
                    where.uri,
                    resync.generation,
                    topic,
                    time.monotonic() - started,
                )

    def _rows(self, batch: SinkBatch, topic: str) -> pa.Table:
        """The topic's records of this batch, as one Arrow table in the driver."""
        records = batch.arrow(topic)
        if records is not None:
            return records.collect_arrow(lambda batches: batches)
        return batch.topic(topic).toArrow()

    def _held(self, where: Location, table: DeltaTable | None, topic: str, partitions: list[int]) -> dict[int, int]:
        held = self.held.get((where.uri, topic))
        if held is None:
            held = _offsets.held(table, self.context.connector, topic, partitions)
        return held

    def _append(self, where: Location, topic: str, records: ArrowRecords, partitions: list[int]) -> int:
        """Append the records of `topic` not yet in the table at `where`, their data files written
        by the workers that read them: the rows written."""
        table = where.load()
        held = self._held(where, table, topic, partitions)
        values = _changes.value_rows(_spread.empty(records))
        if table is None:
            partition_by = self._new_table(where, values.schema)
            target = values.schema
        else:
            target = _schema.conform(table, values, self.cfg, where.uri, self.changes.get(topic)).schema
            partition_by = list(table.metadata().partition_columns)
        started = time.monotonic()
        written = _spread.spread(records, held, target, _write.FileWriter(where, partition_by))
        spent = time.monotonic() - started
        if written.records == 0:
            self.log.info("Delta table %s already holds these records of topic %s: skipped", where.uri, topic)
            return 0
        txns = _offsets.transactions(self.context.connector, topic, written.reached)
        _write.commit_files(where, table, target, written.files, txns, partition_by)
        self._committed(where, None, written.files)
        self.held[(where.uri, topic)] = {**held, **written.reached}
        self.log.info(
            "Delta table %s: %d row(s) appended in %d file(s) (written in %.1f s, committed in %.1f s), "
            "offsets of %s reached %s",
            where.uri,
            written.rows,
            len(written.files),
            spent,
            time.monotonic() - started - spent,
            topic,
            self.held[(where.uri, topic)],
        )
        return written.rows

    def _write_table(self, where: Location, topic: str, rows: pa.Table, partitions: list[int]) -> tuple[int, int]:
        """Commit `rows` of `topic` not yet in the table at `where`: (rows written, keys deleted)."""
        table = where.load()
        held = self._held(where, table, topic, partitions)
        fresh = _changes.past(rows, held)
        if fresh.num_rows == 0:
            self.log.info("Delta table %s already holds these records of topic %s: skipped", where.uri, topic)
            return 0, 0
        advanced = _changes.next_offsets(fresh)
        txns = _offsets.transactions(self.context.connector, topic, advanced)
        keys: pa.Table | None = None
        deleted = 0
        if self.cfg.upserts:
            change = _changes.changes(fresh, self._id_columns(where, fresh), self.cfg.cdc_field)
            values, keys, deleted = change.rows, change.keys, change.deleted
        else:
            values = _changes.value_rows(fresh)
        before = _write.live_files(table)
        if table is None:
            # a new table has no rows to delete: its first commit creates it with the rows and offsets
            _write.append(where, None, values, txns, self._new_table(where, values.schema))
        else:
            values = _schema.conform(table, values, self.cfg, where.uri, self.changes.get(topic))
            if keys is not None:
                _write.merge(where, table, values, keys, txns)
            else:
                _write.append(where, table, values, txns)
        self._committed(where, before, None)
        self.held[(where.uri, topic)] = {**held, **advanced}
        self.log.info(
            "Delta table %s: %d row(s) written, %d key(s) deleted, offsets of %s reached %s",
            where.uri,
            values.num_rows,
            deleted,
            topic,
            self.held[(where.uri, topic)],
        )
        return values.num_rows, deleted

    def _new_table(self, where: Location, columns: pa.Schema) -> list[str]:
        """The partition columns of the table `where` is to get for `columns`; a ConfigError when
        auto-create is off, a DataError when Delta cannot hold a column."""
        if not self.cfg.auto_create:
            raise ConfigError(
                f"Delta table `{where.uri}` does not exist: create it, or set `delta.tables.auto-create-enabled=true`"
            )
        _schema.delta_types(columns)  # a column Delta cannot hold: a clear error first
        return _schema.check_partitions(self.cfg, columns, where.uri)

    def _committed(self, where: Location, before: dict[str, int] | None, adds: list[dict[str, Any]] | None) -> None:
        """Count what the run's commits to the table at `where` added: the files `adds` (from the
        workers), or those live now and not `before`; note the table's version."""
        table = where.load()
        if adds is not None:
            files, size = len(adds), sum(int(a["size"]) for a in adds)
        else:
            new = {p: n for p, n in _write.live_files(table).items() if p not in (before or {})}
            files, size = len(new), sum(new.values())
        self.added[0] += files
        self.added[1] += size
        if table is not None:
            self.versions[where.uri] = table.version()

    def _id_columns(self, where: Location, rows: pa.Table) -> list[str]:
        if self.cfg.id_columns:
            return list(self.cfg.id_columns)
        from_key = _changes.key_fields(rows)
        if from_key:
            return from_key
        raise ConfigError(
            f"upserts and deletes into Delta table `{where.uri}` need its id columns: set "
            "`delta.tables.id-columns`, or give the records a struct key",
            {"delta.tables.id-columns": ["needed for upserts and deletes"]},
        )


class DeltaSinkConnector(SinkConnector[DeltaSinkConfig]):
    """The app transactions of each table are authoritative for that table (as the JDBC sink's
    `connect_sink_offsets`): an offset reset or alteration through Connect is written to every
    table of the connector's topics as a commit of no rows (see `_offsets`).

    `optimize` and `vacuum` are the tables' upkeep: the `optimize` and `vacuum` jobs of `upkeep`,
    tasks of the connector's DAG when it has an `upkeep.schedule`."""

    config_model = DeltaSinkConfig
    task_class = DeltaSinkTask

    def resync_problem(self, config: DeltaSinkConfig, topic: str, mode: str) -> str | None:
        """`replace`: refused where the topic's table may take other topics' rows too (a location
        without `${topic}`, a router, with several topics)."""
        problem = _replace.problem(config, topic, may_route(config)) if mode == "replace" else None
        return f"{problem}: re-read it with `--mode retain`" if problem else None

    def validate(self, config: DeltaSinkConfig) -> dict[str, list[str]]:
        found = problems(config)
        if config.upkeep_schedule is not None and config.transforms and TOPIC in config.location:
            found.setdefault("upkeep.schedule", []).append(
                "the tables to upkeep follow the topics as the transforms rename them (`${topic}` in the "
                "location): they cannot be found from the config, so this sink has no upkeep"
            )
        return found

    def task_configs(self, config: DeltaSinkConfig, max_tasks: int) -> list[dict[str, Any]]:
        base = config.model_dump(by_alias=True, exclude_none=True, exclude={"name", "tasks_max"})
        return [{**base, **(config.model_extra or {}), "topics": list(config.topics)}]

    def lineage(self, config: DeltaSinkConfig) -> list[LineageDataset]:
        """Each topic's table: `file://host` + its directory, or `s3://bucket` + its key prefix.
        Unknown when a transform (a router) may rename the topics a `${topic}` location names, or
        when the location comes from a config provider (known only where the task runs)."""
        if (config.transforms and TOPIC in config.location) or is_placeholder(config.location):
            return []
        found: dict[str, LineageDataset] = {}
        for topic in config.topics:
            dataset = locate(config, topic).dataset(topic)
            found.setdefault(f"{dataset.namespace}|{dataset.name}", dataset)
        return list(found.values())

    def tables(self, config: DeltaSinkConfig) -> dict[str, tuple[Location, list[str]]]:
        """Table URI → (its location, the configured topics written to it). ConfigError when a
        router may rename the topics of a `${topic}` location: their tables are not known then."""
        if config.transforms and TOPIC in config.location:
            raise ConfigError(
                "the tables of this connector follow its topics as its transforms rename them "
                "(`${topic}` in the location, with `transforms`): they cannot be found from its config"
            )
        found: dict[str, tuple[Location, list[str]]] = {}
        for topic in config.topics:
            where = locate(checked(config), topic)
            found.setdefault(where.uri, (where, []))[1].append(topic)
        return found

    def alter_offsets(
        self, name: str, config: DeltaSinkConfig, offsets: Mapping[TopicPartition, int | None] | None
    ) -> None:
        """Written to every table of the connector's topics that exists (a partition's offset in the
        table of its topic)."""
        for where, topics in self.tables(config).values():
            table = where.load()
            if table is None:
                continue
            mine = None if offsets is None else {tp: o for tp, o in offsets.items() if tp.topic in topics}
            if mine is None or mine:
                _offsets.alter(table, name, topics, mine)

    def optimize(self, config: DeltaSinkConfig, log: logging.Logger | None = None) -> dict[str, dict[str, Any]]:
        """Compact each existing table's small files: table URI → delta-rs's metrics (a table that
        fails is logged and the others are compacted, then its error is raised)."""
        return each_table(
            self._existing(config), lambda where: _upkeep.optimize(where, config.optimize_target_size), log or _LOG
        )

    def vacuum(
        self, config: DeltaSinkConfig, retention_hours: int | None = None, log: logging.Logger | None = None
    ) -> dict[str, list[str]]:
        """Delete each existing table's files no version of the retention (`delta.vacuum.retention-hours`
        unless given) needs: table URI → the files deleted (a table that fails, as `optimize`)."""
        hours = config.vacuum_retention_hours if retention_hours is None else retention_hours
        return each_table(self._existing(config), lambda where: _upkeep.vacuum(where, hours), log or _LOG)

    def _existing(self, config: DeltaSinkConfig) -> Iterator[tuple[str, Location]]:
        """The tables of the connector's topics that exist, by URI."""
        for uri, (where, _) in self.tables(config).items():
            if where.load() is not None:
                yield uri, where

    def upkeep(self, name: str, config: DeltaSinkConfig) -> Sequence[Upkeep]:
        """`optimize`, then `vacuum`, of every existing table of the connector's topics; what each
        did per table URI (delta-rs's counts; the number of files vacuum deleted)."""

        def optimize(log: logging.Logger) -> dict[str, Any]:
            done = self.optimize(config, log=log)
            for uri, metrics in done.items():
                log.info("Delta table %s optimized: %s", uri, metrics)
            return {"tables": {uri: _counts(metrics) for uri, metrics in done.items()}}

        def vacuum(log: logging.Logger) -> dict[str, Any]:
            done = self.vacuum(config, log=log)
            for uri, files in done.items():
                log.info("Delta table %s vacuumed: %d file(s) deleted", uri, len(files))
            return {"tables": {uri: {"files_deleted": len(files)} for uri, files in done.items()}}

        return (
            Upkeep("optimize", optimize, "optimize (compact small files)"),
            Upkeep("vacuum", vacuum, "vacuum (delete unreferenced files)"),
        )


def _counts(metrics: Mapping[str, Any]) -> dict[str, int | float]:
    """delta-rs's optimize metrics, their numbers only (`numFilesAdded`, `numFilesRemoved` …)."""
    return {k: v for k, v in metrics.items() if isinstance(v, int | float) and not isinstance(v, bool)}
