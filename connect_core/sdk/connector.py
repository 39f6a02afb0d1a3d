"""Base classes a connector author implements.

A connector is split into tasks (`task_configs`); each task implements one hook:
`SourceTask.read` returns a micro-batch and the positions it reaches,
`SinkTask.write` writes a micro-batch to the target. Everything around those
hooks (leases, fencing, staging, the commit, status and stats) belongs to the
runtime and is not overridable.
"""

from __future__ import annotations

import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar

from connect_core.sdk.config import ConnectorConfig, SinkConnectorConfig
from connect_core.sdk.records import (
    CommittedOffset,
    ErrantRecordReporter,
    Positions,
    SinkBatch,
    SourceBatch,
    TopicPartition,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "WRITE_REPORT",
    "WRITE_TABLES",
    "Connector",
    "ConnectorType",
    "LineageDataset",
    "Signal",
    "SinkConnector",
    "SinkTask",
    "SourceConnector",
    "SourceTask",
    "TaskContext",
    "Upkeep",
]

ConnectorType = Literal["source", "sink"]
#: What a sink's `write` metadata may report of what it wrote to its target (whole numbers).
WRITE_REPORT = ("rows_written", "keys_deleted", "files_written", "bytes_written")
#: The key of a sink's `write` metadata naming the tables it committed to and their versions after
#: the run: `[{"name": "shop.orders", "version": "8623…"}]` (an Iceberg snapshot id, a Delta version).
WRITE_TABLES = "tables"
ConfigT = TypeVar("ConfigT", bound=ConnectorConfig)


@dataclass(frozen=True)
class TaskContext:
    """What the runtime tells a task about itself."""

    connector: str
    task_id: int
    task_count: int
    logger: logging.Logger
    #: Set when the connector has `errors.tolerance=all`: report records that fail here and go on.
    errant: ErrantRecordReporter | None = None
    #: Signals sent to the connector (Debezium's, over the `rest` channel) that no committed run has
    #: consumed yet, oldest first: a source that `accepts_signals` acts on them in this run; the
    #: run's commit marks them consumed, with the positions they changed.
    signals: tuple[Signal, ...] = ()
    #: Topic → the generation of its last re-read (`connect resync`, `Resync.generation`), for the
    #: topics the connector writes, given with signals: a re-read begun now is that number + 1.
    resync_generations: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Signal:
    """A signal (Debezium's): `type` (`execute-snapshot`, `stop-snapshot`, `pause-snapshot`,
    `resume-snapshot`), its `data` (`data-collections`, `type`, …) and the sender's `id`."""

    id: str
    type: str
    data: Mapping[str, Any]


@dataclass(frozen=True)
class LineageDataset:
    """A dataset outside the runtime that a connector reads or writes, named as OpenLineage names
    datasets: `namespace` where it lives (`postgres://host:port`, `mysql://host:port`,
    `file://host`), `name` what it is there (`db.schema.table`, an absolute path). Never a
    credential: lineage events leave the platform.

    `topic`: the topic whose records it holds (a source's table and the topic it is copied to, a
    sink's table and the topic it is written from), so that the runtime can report the topic's
    columns as its columns; needed only when a connector names several datasets."""

    namespace: str
    name: str
    topic: str | None = None


#: An upkeep job's name: it names the job's Airflow task (`upkeep_<name>`) and its recorded runs.
_UPKEEP_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")


@dataclass(frozen=True)
class Upkeep:
    """One table-upkeep job of a sink connector (compaction, snapshot expiry, orphan files …): the
    runtime runs it in a task of the connector's DAG, after the sink's tasks, when its last success
    is older than the connector's `upkeep.schedule`, and records what it did.

    `run(logger)` does the job, on every table the connector writes, and returns what it did (JSON:
    counts, not lists of files); it raises a `ConnectError` to fail. It runs outside Spark, in the
    Airflow task's process, with the config a task run gets (placeholders filled, paths confined)."""

    name: str
    run: Callable[[logging.Logger], Mapping[str, Any]]
    description: str = ""

    def __post_init__(self) -> None:
        if not _UPKEEP_NAME.fullmatch(self.name):
            raise ValueError(f"upkeep job name {self.name[:60]!r}: 1-40 of a-z, 0-9 and `_`, a letter first")


class Connector(ABC, Generic[ConfigT]):
    """A connector plugin: validates its config and splits it into task configs."""

    connector_type: ClassVar[ConnectorType]
    config_model: ClassVar[type[ConnectorConfig]] = ConnectorConfig
    version: ClassVar[str] = "0.1.0"

    def validate(self, config: ConfigT) -> dict[str, list[str]]:
        """Problems pydantic cannot see (cross-field rules), by config key.

        Field types, ranges and required keys are checked by `config_model`
        before this is called; return an empty dict when all is well.
        """
        return {}

    def claims(self, name: str, config: ConfigT) -> dict[str, str]:
        """What outside the runtime connector `name` holds alone (a replication slot), each described
        the same way whichever connector claims it, mapped to the config key it comes from. The runtime
        refuses a create or update that claims what another stored connector claims."""
        return {}

    @abstractmethod
    def task_configs(self, config: ConfigT, max_tasks: int) -> list[dict[str, Any]]:
        """Split the connector into at most `max_tasks` task configs (JSON-serialisable)."""

    def deleted(self, name: str, config: ConfigT) -> None:
        """Called once the connector `name` is deleted (Kafka calls `Connector.stop`): release what it
        holds outside this runtime when its config says so (a replication slot). The delete stands
        whatever this does; an error is logged with the connector's name."""

    def lineage(self, config: ConfigT) -> list[LineageDataset]:
        """The datasets outside the runtime this connector reads (a source) or writes (a sink), for
        OpenLineage; the runtime adds the topics. Empty when they are not known from the config."""
        return []

    def spark_conf(self, config: ConfigT) -> dict[str, str]:
        """Spark settings every run of this connector needs, given to spark-submit
        (e.g. `spark.jars` with a JDBC driver). `spark.jars` lists are merged with the pool's."""
        return {}


class SourceTask(ABC):
    """Reads one bounded micro-batch per run from an external system."""

    def __init__(self, config: Mapping[str, Any], context: TaskContext) -> None:
        self.config = config
        self.context = context
        self.log = context.logger

    @abstractmethod
    def read(self, spark: SparkSession, positions: Positions) -> SourceBatch:
        """Read what is new since `positions`; return the rows and the positions reached."""

    def has_new_data(self, positions: Positions) -> bool | None:
        """A cheap check, without Spark, whether `read` would find anything.

        Return None when the source cannot tell cheaply; the runtime then runs
        the task. Used to skip a Spark start-up for an empty micro-batch.
        Raise `FatalError` or `ConfigError` for a cause no run can get past (a
        refused login): the task fails at once, without paying for Spark.
        """
        return None

    def close(self) -> None:
        """Release resources; called once after the run, whatever its outcome."""


class SinkTask(ABC):
    """Writes committed topic rows to an external system."""

    def __init__(self, config: Mapping[str, Any], context: TaskContext) -> None:
        self.config = config
        self.context = context
        self.log = context.logger

    def open(self, committed: Mapping[TopicPartition, CommittedOffset]) -> Mapping[str, Any] | None:
        """Called before `write` with the offsets (and metadata) last committed.

        A sink that commits recovery state in the offset metadata (e.g. a file
        length) repairs the target here, so a crashed write is not repeated.
        Returning a mapping records it as that metadata right away (before any
        write), which is how a sink remembers its starting point on a first run.
        """
        return None

    @abstractmethod
    def write(self, spark: SparkSession, batch: SinkBatch) -> Mapping[str, Any] | None:
        """Write `batch`; return metadata to commit with the new offsets, or None.

        Whole numbers under the keys of `WRITE_REPORT` (rows written, keys deleted, files and
        bytes written) say what the run wrote to the target: the runtime records them with the
        run and sums them in `/metrics`. Under `WRITE_TABLES`, the tables committed to and their
        versions after the run (shown by the Connect view)."""

    def close(self) -> None:
        """Release resources; called once after the run, whatever its outcome."""


class SourceConnector(Connector[ConfigT]):
    connector_type: ClassVar[ConnectorType] = "source"
    task_class: ClassVar[type[SourceTask]]
    #: Whether its tasks act on signals (`TaskContext.signals`): `POST /connectors/{name}/signals`
    #: is refused for a connector that does not.
    accepts_signals: ClassVar[bool] = False
    #: The `execute-snapshot` options (`surrogate-key`, `additional-conditions`) its tasks act on:
    #: a signal carrying another is refused before it is queued.
    signal_options: ClassVar[tuple[str, ...]] = ()

    def signal_task(self, config: ConfigT, task_configs: Sequence[Mapping[str, Any]], signal: Signal) -> int:
        """The task that acts on `signal` (its run gets it, its commit consumes it): task 0, unless the
        connector's tasks split what they read (a JDBC source: the task reading the table it names)."""
        return 0

    def check_signal(self, config: ConfigT, signal: Signal) -> None:
        """Check `signal` (well formed already) against what the connector reads, before it is
        queued: raise ConfigError naming every table it cannot act on and why (a 400), RetriableError
        when the source cannot be asked in time (a 503). Default: nothing to check."""

    def check_resync(self, config: ConfigT, table: str, positions: Positions) -> str:
        """Whether `connect resync` may re-read `table` now: the table as the connector names it.
        ConfigError when it cannot (this default: the connector re-reads no tables); ConflictError
        when a re-read of it is under way (`positions` are the connector's committed ones)."""
        from connect_core.sdk.errors import ConfigError

        raise ConfigError("the connector does not re-read tables (`connect resync` is for JDBC sources)")

    def resync_topic(self, config: ConfigT, table: str) -> str | None:
        """The topic a re-read of `table` (as `check_resync` names it) goes to, whose sinks are asked
        whether they can take it (`SinkConnector.resync_problem`); None: not known from the config."""
        return None

    def output_topics(self, config: ConfigT) -> list[str]:
        """Topics the connector writes, when known from its config (they become the DAG's Assets).

        The default reads a `topic` field; connectors that write several override it.
        """
        topic = getattr(config, "topic", None)
        return [topic] if isinstance(topic, str) else []


class SinkConnector(Connector[ConfigT]):
    connector_type: ClassVar[ConnectorType] = "sink"
    config_model: ClassVar[type[ConnectorConfig]] = SinkConnectorConfig
    task_class: ClassVar[type[SinkTask]]

    def alter_offsets(self, name: str, config: ConfigT, offsets: Mapping[TopicPartition, int | None] | None) -> None:
        """Called when the connector's committed offsets are altered (`offsets`; None for a partition:
        removed) or reset (`None`) while it is stopped, for a sink that also keeps offsets in its
        target (as Kafka's `SinkConnector.alterOffsets`), before the runtime changes its own: make
        the target agree, or raise to refuse the change (the runtime's offsets then stay)."""

    def resync_problem(self, config: ConfigT, topic: str, mode: str) -> str | None:
        """Why this sink cannot take a re-read (`connect resync`) of `topic` in `mode` (`replace` or
        `retain`), in words for the user (the resync is then refused with it, a 400); None when it can.
        A `replace` swaps a copy in for the whole target: a sink refuses it where the target holds
        other topics' rows too. It may ask the target (a connection error propagates). Default: None."""
        return None

    def upkeep(self, name: str, config: ConfigT) -> Sequence[Upkeep]:
        """The table-upkeep jobs of connector `name`, in the order they run (each after the one
        before, done or not). Called wherever its DAG is built, so it must only describe the jobs:
        no I/O until a job's `run`. Default: none (`upkeep.schedule` is then refused at create)."""
        return ()
