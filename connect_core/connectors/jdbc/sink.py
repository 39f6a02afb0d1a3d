"""JdbcSinkConnector: topics into database tables, fast and exactly once.

A micro-batch goes, per topic, through the target of the URL's database (`targets/`: one per
database, picked by its dialect): staged from every Spark partition in parallel, then merged in
one transaction of the target with the topic offsets, in a table `connect_sink_offsets` of the
target. A batch delivered again after a crash skips every row at or past those offsets, so
nothing is written twice, whatever `insert.mode` is. This module owns what every database shares:
which rows are new, the layout of a topic's rows (`_staging`) and the bad rows' reports.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from connect_core.connectors._resync import may_route
from connect_core.connectors.jdbc import _staging
from connect_core.connectors.jdbc.config import JdbcSinkConfig
from connect_core.connectors.jdbc.dialects import dialect_for, lineage_datasets
from connect_core.connectors.jdbc.targets import BadRow, target_for
from connect_core.sdk import ArrowRecords, ErrantRecords, LineageDataset, SinkBatch, SinkConnector, SinkTask
from connect_core.sdk.errors import ConfigError
from connect_core.sdk.records import CommittedOffset, TopicPartition

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["JdbcSinkConnector", "JdbcSinkTask"]


class JdbcSinkTask(SinkTask):
    def open(self, committed: Mapping[TopicPartition, CommittedOffset]) -> Mapping[str, Any] | None:
        self.cfg = JdbcSinkConfig.model_validate(self.config)
        dialect = dialect_for(self.cfg.connection_url, self.cfg.connection_user, self.cfg.connection_password)
        stage = (
            "connect_stage_" + hashlib.md5(f"{self.context.connector}/{self.context.task_id}".encode()).hexdigest()[:16]
        )
        self.target = target_for(dialect)(dialect, self.cfg, self.context.connector, stage, self.log)
        self.applied = self.target.open(committed, self.context.errant is not None)
        return None

    def write(self, spark: SparkSession, batch: SinkBatch) -> Mapping[str, Any] | None:
        from pyspark.sql import functions as F

        self._refuse_merged(batch)
        written = 0
        replaced = set()
        for topic in batch.read_topics():
            fresh = [
                (F.col("__partition") == tp.partition) & (F.col("__offset") >= self.applied.get(tp, 0))
                for tp in batch.partitions
                if tp.topic == topic
            ]
            keep = fresh[0]
            for cond in fresh[1:]:
                keep = keep | cond
            read, records = batch.topic(topic), batch.arrow(topic)
            applied = {tp.partition: self.applied.get(tp, 0) for tp in batch.partitions if tp.topic == topic}
            # the topic's records' name after the transforms (routers) picks the table
            changes = batch.schema_changes.get(topic)
            layout = _staging.layout(topic, read.filter(keep), self.cfg, batch.destination(topic), changes)
            resync = batch.replacing.get(topic)
            if resync is not None:  # a `replace` re-read: into the copy of the table
                layout = layout._replace(table=self.target.replica(layout.table, topic, resync.generation))
            if self.context.errant is not None:
                self._report_again(topic, read, applied, records)
            copied, bad = self.target.write(topic, layout, records, applied)
            if bad:
                self._report(topic, read, bad, records)
            written += copied
            if resync is not None and resync.ends:
                self._swap_in(batch, topic)
                replaced.add(topic)
        for topic in sorted(set(batch.replacing) - replaced):
            if batch.replacing[topic].ends:  # a re-read's end with no rows of it in this batch
                self._swap_in(batch, topic)
        return {"rows_written": written}

    def _refuse_merged(self, batch: SinkBatch) -> None:
        """A ConfigError, before anything is written, when a `replace` re-read's table also holds
        other topics' rows, by the config or in this batch: the swap would drop them."""
        for topic in sorted(batch.replacing):
            problem = _replace_problem(self.cfg, topic)
            if problem is None and topic in batch.read_topics():
                table = _staging.table_of(self.cfg, batch.destination(topic))
                shared = [
                    t
                    for t in batch.read_topics()
                    if t != topic and _staging.table_of(self.cfg, batch.destination(t)) == table
                ]
                if shared:
                    problem = (
                        f"the rows of topics {', '.join(shared)} go to table {'.'.join(table)} too, and a replace "
                        f"re-read of `{topic}` would drop them"
                    )
            if problem is not None:
                raise ConfigError(f"{problem}: re-read `{topic}` with `--mode retain`")

    def _swap_in(self, batch: SinkBatch, topic: str) -> None:
        """The copy `replace` re-read of `topic` wrote swapped in for its table, atomically: after
        its last rows were written (their offsets with them), so a batch given again after a kill
        writes nothing twice and finds the table swapped, or swaps it. The target finds the copy it
        entered (and its table) itself: a batch that ends a re-read with no rows carries no routes."""
        resync = batch.replacing[topic]
        known = topic in batch.routes or not may_route(self.cfg)
        table = _staging.table_of(self.cfg, batch.destination(topic)) if known else None
        if self.target.swap_in(table, topic, resync.generation) is None and table is None:
            self.log.warning(
                "%s: re-read %d ended with no rows written by this sink, and its transforms may route the topic: "
                "its table is not known, so nothing was swapped (a re-read with no rows at all leaves the table "
                "as it is; re-read again to empty it)",
                topic,
                resync.generation,
            )

    def _report_again(self, topic: str, df: DataFrame, applied: dict[int, int], records: ArrowRecords | None) -> None:
        """Rows an earlier run set aside and wrote past in the target, whose run did not commit:
        the runtime has not dead-lettered them, so they are reported again."""
        earlier = self.target.set_aside(topic, applied)
        if earlier:
            self._report(topic, df, earlier, records)

    def _report(self, topic: str, df: DataFrame, bad: list[BadRow], records: ArrowRecords | None = None) -> None:
        """Send the bad rows (partition, offset, class, message) of `topic`, as read, to the runtime:
        picked from the topic's Arrow records where there are (no Spark job for a small batch)."""
        import pyarrow as pa
        from pyspark.sql import functions as F

        assert self.context.errant is not None
        index = {(p, o): (cls, msg) for p, o, cls, msg in bad}
        if records is not None:
            rows = records.collect_arrow(_picker(index))
        else:
            keys = df.sparkSession.createDataFrame([(p, o) for p, o in index], "__bp int, __bo long")
            condition = (F.col("__partition") == F.col("__bp")) & (F.col("__offset") == F.col("__bo"))
            rows = df.join(F.broadcast(keys), condition).drop("__bp", "__bo").toArrow()
        rows = rows.sort_by([("__partition", "ascending"), ("__offset", "ascending")])
        rows = rows.set_column(  # where it was read (a router may have renamed it)
            rows.column_names.index("__topic"), "__topic", pa.array([topic] * rows.num_rows, pa.string())
        )
        found = list(zip(rows.column("__partition").to_pylist(), rows.column("__offset").to_pylist(), strict=True))
        self.context.errant.report(
            ErrantRecords(rows, [index[k][0] for k in found], [index[k][1] for k in found], stage="TASK_PUT")
        )


def _replace_problem(cfg: JdbcSinkConfig, topic: str) -> str | None:
    """Why a `replace` re-read of `topic` cannot swap its table: other topics' rows go there too
    (or may: the sink cannot run a router over names). None for one topic, or `${topic}` tables."""
    others = [t for t in cfg.topics if t != topic]
    if not others:
        return None
    if "${topic}" not in cfg.table_name_format:
        return (
            f"`table.name.format` `{cfg.table_name_format}` writes topics {', '.join(cfg.topics)} into one table, "
            f"and a replace re-read of `{topic}` would drop the other topics' rows"
        )
    if may_route(cfg):
        return (
            f"the sink's transforms may route topics {', '.join(cfg.topics)} into one table, and a replace "
            f"re-read of `{topic}` would drop the other topics' rows"
        )
    return None


def _picker(index: Mapping[tuple[int, int], Any]) -> Any:
    """A filter of topic batches down to the rows at `index`'s (partition, offset) pairs."""
    by_partition: dict[int, list[int]] = {}
    for p, o in index:
        by_partition.setdefault(p, []).append(o)

    def pick(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.compute as pc

        for batch in batches:
            mask = None
            for p, offsets in by_partition.items():
                hit = pc.and_(
                    pc.equal(batch.column("__partition"), p), pc.is_in(batch.column("__offset"), pa.array(offsets))
                )
                mask = hit if mask is None else pc.or_(mask, hit)
            if mask is not None:
                picked = batch.filter(mask)
                if picked.num_rows:
                    yield picked

    return pick


class JdbcSinkConnector(SinkConnector[JdbcSinkConfig]):
    """The offsets in the target's `connect_sink_offsets` are authoritative (as those of Kafka's
    HDFS/S3 sinks): an offset reset or alteration through Connect is applied there too."""

    config_model = JdbcSinkConfig
    task_class = JdbcSinkTask

    def lineage(self, config: JdbcSinkConfig) -> list[LineageDataset]:
        """The tables `table.name.format` names for the topics; unknown when a transform (a router)
        may rename the topics first."""
        if config.transforms:
            return []
        tables = list(dict.fromkeys(config.table_name_format.replace("${topic}", t) for t in config.topics))
        return lineage_datasets(config.connection_url, tables)

    def resync_problem(self, config: JdbcSinkConfig, topic: str, mode: str) -> str | None:
        """`replace`: refused where the topic's table may hold other topics' rows too (a
        `table.name.format` without `${topic}`, a router, with several topics). `retain` with
        `insert.mode=insert`: refused where the table has a key (every row is written again, each
        a duplicate)."""
        if mode == "replace":
            problem = _replace_problem(config, topic)
            return f"{problem}: re-read it with `--mode retain`" if problem else None
        if mode != "retain" or config.insert_mode != "insert":
            return None
        advice = f"set `insert.mode` to `upsert`, or re-read `{topic}` with `--mode replace`"
        if config.pk_mode != "none":
            return (
                f"a `retain` re-read writes every row of topic `{topic}` again, and with `insert.mode=insert` and "
                f"`pk.mode={config.pk_mode}` each is refused as a duplicate key: {advice}"
            )
        if may_route(config):
            return (
                f"a `retain` re-read writes every row of topic `{topic}` again with `insert.mode=insert`, and the "
                f"sink's transforms may route it to a table it cannot check for a key: {advice}"
            )
        table = _staging.table_of(config, topic)
        dialect = dialect_for(config.connection_url, config.connection_user, config.connection_password)
        target = target_for(dialect)(dialect, config, config.name or "", "", logging.getLogger(__name__))
        if target.has_key(table):
            return (
                f"a `retain` re-read writes every row of topic `{topic}` again with `insert.mode=insert`, and table "
                f"{'.'.join(table)} has a key: each row is refused as a duplicate; {advice}"
            )
        return None

    def alter_offsets(
        self, name: str, config: JdbcSinkConfig, offsets: Mapping[TopicPartition, int | None] | None
    ) -> None:
        dialect = dialect_for(config.connection_url, config.connection_user, config.connection_password)
        target_for(dialect).alter_offsets(dialect, name, offsets)

    def task_configs(self, config: JdbcSinkConfig, max_tasks: int) -> list[dict[str, Any]]:
        base = config.model_dump(by_alias=True, exclude_none=True, exclude={"name", "tasks_max"})
        return [{**base, "topics": list(config.topics)} for _ in range(max_tasks)]
