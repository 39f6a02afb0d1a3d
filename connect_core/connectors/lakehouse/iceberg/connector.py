"""IcebergSinkConnector: topics into Iceberg tables through pyiceberg, exactly once.

An append to the listed tables is written where the records are read: Spark's Python workers
write the data files (`_spread`, `_write.FileWriter`; the driver itself for a small batch), the
driver commits them. Upserts, deletes and dynamic routing take each topic's new records as Arrow in
the driver (`_changes`: the newest change per key replaces the key's rows). Either way a table gets
one Iceberg commit per run: its rows and, in the snapshot summary, the topic offsets it has
reached (`_offsets`). The runtime then commits the same offsets in its fenced Postgres commit. A run killed
between the two commits is repaired by the next: each table's own offsets say which of the
redelivered records it already holds.

One task writes all partitions (`tasks.max` is capped at 1, as the Java sink's single commit
coordinator): two tasks committing to one table would race for it and each record only its own
partitions' offsets.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from connect_core.connectors.lakehouse import _changes, _spread
from connect_core.connectors.lakehouse._upkeep import each_table
from connect_core.connectors.lakehouse.iceberg import _catalog, _offsets, _replace, _schema, _upkeep, _write
from connect_core.connectors.lakehouse.iceberg.config import TABLE_NAME, IcebergSinkConfig, problems
from connect_core.sdk import WRITE_REPORT, WRITE_TABLES, LineageDataset, SinkBatch, SinkConnector, SinkTask, Upkeep
from connect_core.sdk.errors import ConfigError, DataError
from connect_core.sdk.records import ArrowRecords, CommittedOffset, Resync, TopicPartition

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table
    from pyspark.sql import SparkSession

__all__ = ["IcebergSinkConnector", "IcebergSinkTask"]


class IcebergSinkTask(SinkTask):
    def open(self, committed: Mapping[TopicPartition, CommittedOffset]) -> Mapping[str, Any] | None:
        self.cfg = IcebergSinkConfig.model_validate(self.config)
        self.catalog: Catalog = _catalog.load_catalog(self.cfg)
        #: table → the offsets it holds for this connector, read at its first use in the run
        self.held: dict[str, _offsets.Offsets] = {}
        #: table → its snapshot after this run's commit
        self.versions: dict[str, int | None] = {}
        return None

    def write(self, spark: SparkSession, batch: SinkBatch) -> Mapping[str, Any] | None:
        self.versions.clear()  # an attempt's own commits (a retried write runs again)
        self.changes = batch.schema_changes  # topic → how its columns changed (`schema.propagation`)
        report = dict.fromkeys(WRITE_REPORT, 0)  # rows written, keys deleted, files and bytes added
        for topic in batch.replacing:
            self._resync(batch, topic)  # refused before a row is written
        for topic in batch.read_topics():
            into = self._replicas(batch, topic)
            records = batch.arrow(topic)
            if records is not None and not self.cfg.upserts and not self.cfg.dynamic_enabled:
                # an append to fixed tables: the workers write the data files (`_spread`)
                _changes.refuse_envelope(topic, _spread.empty(records), "iceberg.tables.cdc-field")
                for name in self.cfg.tables:
                    for key, n in zip(WRITE_REPORT, self._append(name, topic, records, into[name]), strict=True):
                        report[key] += n
                continue
            rows = self._rows(batch, topic)
            _changes.refuse_envelope(topic, rows, "iceberg.tables.cdc-field")
            for name, routed in self._routes(rows).items():
                for key, n in zip(WRITE_REPORT, self._write_table(name, topic, routed, into.get(name)), strict=True):
                    report[key] += n
        self._swap_ended(batch)
        tables = [{"name": n, "version": str(v)} for n, v in sorted(self.versions.items()) if v is not None]
        return {**report, WRITE_TABLES: tables}

    def _resync(self, batch: SinkBatch, topic: str) -> Resync | None:
        """The `replace` re-read the batch's rows of `topic` belong to (its listed tables get a copy);
        a ConfigError, before anything is written, where the tables take other topics' rows too."""
        resync = batch.replacing.get(topic)
        problem = _replace.problem(self.cfg, topic) if resync is not None else None
        if problem is not None:
            raise ConfigError(f"{problem}: re-read `{topic}` with `--mode retain`")
        return resync

    def _replicas(self, batch: SinkBatch, topic: str) -> dict[str, str]:
        """Listed table → the table its rows of `topic` go to: its re-read's copy, or itself."""
        resync = self._resync(batch, topic)
        if resync is None:
            return {name: name for name in self.cfg.tables}
        return {
            name: _replace.replica(self.catalog, name, self.context.connector, topic, resync.generation)
            for name in self.cfg.tables
        }

    def _swap_ended(self, batch: SinkBatch) -> None:
        """Swap in the copies of the `replace` re-reads this batch ends (after their last rows)."""
        for topic, resync in sorted(batch.replacing.items()):
            if not resync.ends or self._resync(batch, topic) is None:
                continue
            for name in self.cfg.tables:
                started = time.monotonic()
                snapshot = _replace.swap_in(self.catalog, name, self.context.connector, topic, resync.generation)
                self.held.pop(name, None)
                if snapshot is not None:
                    self.versions[name] = snapshot
                    self.log.info(
                        "table %s: re-read %d of %s swapped in in %.1f s",
                        name,
                        resync.generation,
                        topic,
                        time.monotonic() - started,
                    )

    def close(self) -> None:
        """Close the sql catalog's connection pool (the other catalogs hold HTTP sessions only)."""
        engine = getattr(getattr(self, "catalog", None), "engine", None)
        if engine is not None:
            engine.dispose()

    def _rows(self, batch: SinkBatch, topic: str) -> pa.Table:
        """The topic's records of this batch, as one Arrow table in the driver."""
        records = batch.arrow(topic)
        if records is not None:
            return records.collect_arrow(lambda batches: batches)
        return batch.topic(topic).toArrow()

    def _routes(self, rows: pa.Table) -> dict[str, pa.Table]:
        """Table → its records: every listed table gets every record (as the Java sink's static
        routing), or each record goes to the table its route field names."""
        if not self.cfg.dynamic_enabled:
            return {name: rows for name in self.cfg.tables}
        field = str(self.cfg.route_field)
        if field not in rows.column_names:
            raise DataError(f"the records have no route field `{field}` (`iceberg.tables.route-field`)")
        names = pc.cast(rows[field], pa.string())
        routed: dict[str, pa.Table] = {}
        for name in pc.unique(names).to_pylist():
            if name is None or not TABLE_NAME.fullmatch(name):
                shown = "null" if name is None else f"`{name[:80]}`"
                raise DataError(f"route field `{field}` holds {shown}, which is no table name (`namespace.table`)")
            routed[name] = rows.filter(pc.fill_null(pc.equal(names, name), False))
        return routed

    def _held(self, name: str, table: Table | None) -> _offsets.Offsets:
        if name not in self.held:
            self.held[name] = _offsets.read(table, self.context.connector) if table is not None else {}
        return self.held[name]

    def _append(
        self, configured: str, topic: str, records: ArrowRecords, name: str | None = None
    ) -> tuple[int, int, int, int]:
        """Append the records of `topic` not yet in table `name` (by default the listed table
        `configured`; a re-read's copy of it), their data files written by the workers that read
        them: (rows written, 0, data files added, their bytes)."""
        name = name or configured
        table = _schema.load_table(self.catalog, name)
        held = self._held(name, table)
        values = _changes.value_rows(_spread.empty(records))
        if table is None:
            table = _schema.create_table(self.catalog, name, values.schema, self.cfg, configured)
        table, _ = _schema.conform(table, values, self.cfg, name, self.changes.get(topic))
        started = time.monotonic()
        written = _spread.spread(records, held.get(topic, {}), table.schema().as_arrow(), _write.FileWriter(table))
        spent = time.monotonic() - started
        if written.records == 0:
            self.log.info("table %s already holds these records of topic %s: skipped", name, topic)
            return 0, 0, 0, 0
        reached = {**held, topic: {**held.get(topic, {}), **written.reached}}
        files, size, self.versions[name] = _write.commit_files(
            table, written.files, {_offsets.key(self.context.connector): _offsets.encode(reached)}
        )
        self.held[name] = reached
        self.log.info(
            "table %s: %d row(s) appended in %d file(s) (written in %.1f s, committed in %.1f s), offsets of %s reached %s",
            name,
            written.rows,
            files,
            spent,
            time.monotonic() - started - spent,
            topic,
            reached[topic],
        )
        return written.rows, 0, files, size

    def _write_table(
        self, configured: str, topic: str, rows: pa.Table, name: str | None = None
    ) -> tuple[int, int, int, int]:
        """Commit `rows` of `topic` not yet in table `name` (by default the table `configured`; a
        re-read's copy of it): (rows written, keys deleted, data files added, their bytes), as
        `WRITE_REPORT` orders them."""
        name = name or configured
        table = _schema.load_table(self.catalog, name)
        held = self._held(name, table)
        fresh = _changes.past(rows, held.get(topic, {}))
        if fresh.num_rows == 0:
            self.log.info("table %s already holds these records of topic %s: skipped", name, topic)
            return 0, 0, 0, 0
        keys: pa.Table | None = None
        deleted = 0
        if self.cfg.upserts:
            change = _changes.changes(fresh, self._id_columns(configured, fresh), self.cfg.cdc_field)
            values, keys, deleted = change.rows, change.keys, change.deleted
        else:
            values = _changes.value_rows(fresh)
        if table is None:
            table = _schema.create_table(self.catalog, name, values.schema, self.cfg, configured)
        table, values = _schema.conform(table, values, self.cfg, name, self.changes.get(topic))
        reached = {**held, topic: {**held.get(topic, {}), **_changes.next_offsets(fresh)}}
        files, size, self.versions[name] = _write.commit(
            table, values, keys, {_offsets.key(self.context.connector): _offsets.encode(reached)}
        )
        self.held[name] = reached
        self.log.info(
            "table %s: %d row(s) written, %d key(s) deleted, offsets of %s reached %s",
            name,
            values.num_rows,
            deleted,
            topic,
            reached[topic],
        )
        return values.num_rows, deleted, files, size

    def _id_columns(self, name: str, rows: pa.Table) -> list[str]:
        found = self.cfg.id_columns(name)
        if found:
            return found
        from_key = _changes.key_fields(rows)
        if from_key:
            return from_key
        raise ConfigError(
            f"upserts and deletes into `{name}` need its id columns: set `iceberg.tables.default-id-columns` "
            f"(or `iceberg.table.{name}.id-columns`), or give the records a struct key",
            {"iceberg.tables.default-id-columns": ["needed for upserts and deletes"]},
        )


class IcebergSinkConnector(SinkConnector[IcebergSinkConfig]):
    """The offsets in each table's snapshots are authoritative for that table (as the JDBC sink's in
    `connect_sink_offsets`): an offset reset or alteration through Connect is written to every
    table the connector writes (a table property, see `_offsets`).

    Its tables' upkeep (`_upkeep`: compaction, snapshot expiry, orphan files) are the jobs of
    `upkeep`, tasks of the connector's DAG when it has an `upkeep.schedule`."""

    config_model = IcebergSinkConfig
    task_class = IcebergSinkTask

    def resync_problem(self, config: IcebergSinkConfig, topic: str, mode: str) -> str | None:
        """`replace`: refused where the tables take other topics' rows too, or rows name their table."""
        problem = _replace.problem(config, topic) if mode == "replace" else None
        return f"{problem}: re-read it with `--mode retain`" if problem else None

    def validate(self, config: IcebergSinkConfig) -> dict[str, list[str]]:
        return problems(config)

    def task_configs(self, config: IcebergSinkConfig, max_tasks: int) -> list[dict[str, Any]]:
        base = config.model_dump(by_alias=True, exclude_none=True, exclude={"name", "tasks_max"})
        return [{**base, **(config.model_extra or {}), "topics": list(config.topics)}]

    def lineage(self, config: IcebergSinkConfig) -> list[LineageDataset]:
        """Each listed table, in the namespace of its catalog: the REST server's URI, else the
        warehouse directory (`file://` + path). Unknown when routed dynamically."""
        if config.dynamic_enabled:
            return []
        if config.kind == "rest" and config.catalog_uri:
            from urllib.parse import urlsplit

            parts = urlsplit(config.catalog_uri)
            host = parts.hostname or ""
            namespace = f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}{parts.path.rstrip('/')}"
        else:
            namespace = f"file://{config.catalog_warehouse or ''}"
        return [LineageDataset(namespace, table) for table in config.tables]

    def alter_offsets(
        self, name: str, config: IcebergSinkConfig, offsets: Mapping[TopicPartition, int | None] | None
    ) -> None:
        """Written to every listed table that exists (a dynamically routed connector: every table of
        the catalog whose history carries its offsets)."""
        catalog = _catalog.load_catalog(config)
        try:
            for table in _tables(catalog, name, config):
                _offsets.alter(table, name, offsets)
        finally:
            _close(catalog)

    def upkeep(self, name: str, config: IcebergSinkConfig) -> Sequence[Upkeep]:
        """Compaction, snapshot expiry and orphan-file removal (`_upkeep`), in that order, of every
        table `alter_offsets` writes to; each keeps the rows and every connector's offsets."""
        from datetime import timedelta

        def each(job: Callable[[Table, logging.Logger], dict[str, Any]]) -> Callable[[logging.Logger], dict[str, Any]]:
            def run(log: logging.Logger) -> dict[str, Any]:
                catalog = _catalog.load_catalog(config)
                try:
                    named = ((".".join(t.name()), t) for t in _tables(catalog, name, config))
                    return {"tables": each_table(named, lambda t: job(t, log), log)}
                finally:
                    _close(catalog)

            return run

        return (
            Upkeep(
                "compact",
                each(lambda t, log: _upkeep.compact(t, config.compaction_target_size, log)),
                "compact small files",
            ),
            Upkeep(
                "expire_snapshots",
                each(
                    lambda t, log: _upkeep.expire_snapshots(
                        t, timedelta(hours=config.snapshots_max_age_hours), config.snapshots_min_keep, log
                    )
                ),
                "expire snapshots",
            ),
            Upkeep(
                "remove_orphans",
                each(lambda t, log: _upkeep.remove_orphans(t, timedelta(hours=config.orphans_older_than_hours), log)),
                "remove orphan files",
            ),
        )


def _tables(catalog: Catalog, name: str, config: IcebergSinkConfig) -> Iterator[Table]:
    """The tables connector `name` writes that exist: the listed ones, or when routed dynamically
    every table of the catalog whose history carries its offsets."""
    from pyiceberg.exceptions import NoSuchTableError

    if config.dynamic_enabled:
        names = [".".join(t) for ns in catalog.list_namespaces() for t in catalog.list_tables(ns)]
    else:
        names = list(config.tables)
    for table_name in names:
        try:
            table = catalog.load_table(table_name)
        except NoSuchTableError:
            continue
        if config.dynamic_enabled and not _offsets.read(table, name):
            continue
        yield table


def _close(catalog: Catalog) -> None:
    """Close a sql catalog's connection pool (the other catalogs hold HTTP sessions only)."""
    engine = getattr(catalog, "engine", None)
    if engine is not None:
        engine.dispose()
