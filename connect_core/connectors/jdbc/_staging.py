"""The JDBC sink's staged layout, shared by its targets: a topic's rows as (columns…, partition,
offset), written by a target's writer from every Spark partition in parallel (or from the driver
when the topic's records are small), each partition reporting the offsets it reached."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from connect_core.connectors.jdbc.dialects import parse_identifier
from connect_core.sdk import ArrowRecords
from connect_core.sdk.errors import ConfigError
from connect_core.sdk.transforms import TOMBSTONE_COLUMN, is_value_column

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from connect_core.connectors.jdbc.config import JdbcSinkConfig

__all__ = [
    "COPIED",
    "KAFKA_PK",
    "STAGE_DELETED",
    "STAGE_OFFSET",
    "STAGE_PARTITION",
    "ArrowStaged",
    "Layout",
    "TombstoneSeen",
    "copier",
    "key_fields",
    "layout",
    "next_offsets",
    "run_copy",
    "stager",
    "table_of",
    "tombstones_refused",
    "where_text",
]

KAFKA_PK = ("__connect_topic", "__connect_partition", "__connect_offset")
STAGE_PARTITION, STAGE_OFFSET = "__connect_stage_partition", "__connect_stage_offset"
#: True for a tombstone (a record whose value is null): staged before the partition and offset
STAGE_DELETED = "__connect_stage_deleted"
_P, _O = STAGE_PARTITION, STAGE_OFFSET


COPIED = "p int, o long, n long"


class ArrowStaged(NamedTuple):
    """The staged rows of the Arrow path: the topic's records, and the `_stager` over them."""

    records: ArrowRecords
    stage: Any


def where_text(staged: DataFrame | ArrowStaged) -> str:
    if isinstance(staged, ArrowStaged) and staged.records.in_driver:
        return "from the driver"
    return "from Spark's workers"


def run_copy(staged: DataFrame | ArrowStaged, copy: Any, schema: str = COPIED) -> list[dict[str, Any]]:
    """`copy` (a `_copier`) over every partition of the staged rows, what each reports collected:
    in the Spark workers, or in the driver when the topic's records are small (`in_driver`)."""
    if isinstance(staged, ArrowStaged):
        stage = staged.stage
        return staged.records.collect_mapped(lambda batches: copy(stage(batches)), schema)
    return [r.asDict() for r in staged.mapInArrow(copy, schema).collect()]


def stager(
    columns: list[str],
    kafka: bool,
    applied: dict[int, int],
    from_key: list[str] | None = None,
    *,
    deleted: bool = False,
) -> Any:
    """Topic batches → the staged layout (`columns`, [`STAGE_DELETED` when `deleted`,] partition,
    offset), rows already applied dropped; the columns in `from_key` are fields of the record's key."""
    keyed_columns = set(from_key or ())
    source = {KAFKA_PK[0]: "__topic", KAFKA_PK[1]: "__partition", KAFKA_PK[2]: "__offset"} if kafka else {}

    def stage(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.compute as pc

        for batch in batches:
            partition, offset = batch.column("__partition"), batch.column("__offset")
            old = None
            for p, below in applied.items():
                if below:
                    cond = pc.and_(pc.equal(partition, p), pc.less(offset, below))
                    old = cond if old is None else pc.or_(old, cond)
            if old is not None:
                batch = batch.filter(pc.invert(old))
            arrays = [
                batch.column("__key").field(c) if c in keyed_columns else batch.column(source.get(c, c))
                for c in columns
            ]
            names = [*columns, _P, _O]
            if deleted:
                arrays.append(_tombstones(batch))
                names.insert(len(columns), STAGE_DELETED)
            yield pa.RecordBatch.from_arrays(
                [*arrays, batch.column("__partition"), batch.column("__offset")], names=names
            )

    return stage


class TombstoneSeen(Exception):
    """A writer that cannot apply tombstones met one (the caller takes the merge path)."""


def copier(write: Any, width: int, *, refuse_tombstones: bool = False) -> Any:
    """The function every Spark partition runs: the first `width` columns of its Arrow batches go
    to `write` (one COPY); yields, per topic partition it saw, the largest offset and the row count.
    With `refuse_tombstones`, a staged tombstone (`STAGE_DELETED`) raises `TombstoneSeen`."""

    def copy(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.compute as pc

        seen: dict[int, tuple[int, int]] = {}

        def rows() -> Iterator[Any]:
            for batch in batches:
                if batch.num_rows:
                    if refuse_tombstones and pc.any(batch.column(STAGE_DELETED)).as_py():
                        raise TombstoneSeen(f"a tombstone at offset {_first_tombstone(batch)}")
                    note_offsets(batch, seen)
                    yield batch.select(list(range(width)))

        write(rows())
        yield pa.RecordBatch.from_pydict(
            {"p": list(seen), "o": [o for o, _ in seen.values()], "n": [n for _, n in seen.values()]},
            schema=pa.schema([("p", pa.int32()), ("o", pa.int64()), ("n", pa.int64())]),
        )

    return copy


def tombstones_refused(topic: str, found: int) -> str:
    """Why a batch with tombstones fails when `delete.enabled` is off (Kafka's JDBC sink fails too)."""
    return (
        f"topic `{topic}` has {found} tombstone(s) (records whose value is null, as a CDC source's deletes) and "
        "`delete.enabled` is false: set `delete.enabled=true` (with `pk.mode=record_key`) to delete their rows, "
        "or drop them first (the Filter transform with the RecordIsTombstone predicate)"
    )


def _tombstones(batch: Any) -> Any:
    """A topic batch's tombstone flags, never null (false where the batch has no `__tombstone`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if TOMBSTONE_COLUMN not in batch.schema.names:
        return pa.repeat(pa.scalar(False), batch.num_rows)
    return pc.fill_null(batch.column(TOMBSTONE_COLUMN), False)


def _first_tombstone(batch: Any) -> str:
    import pyarrow.compute as pc

    at = pc.index(batch.column(STAGE_DELETED), True).as_py()
    return f"{batch.column(_P)[at].as_py()}/{batch.column(_O)[at].as_py()}"


def note_offsets(batch: Any, seen: dict[int, tuple[int, int]]) -> None:
    import pyarrow as pa

    grouped = pa.Table.from_batches([batch]).group_by(_P).aggregate([(_O, "max"), (_O, "count")])
    for p, o, n in zip(
        grouped[_P].to_pylist(), grouped[f"{_O}_max"].to_pylist(), grouped[f"{_O}_count"].to_pylist(), strict=True
    ):
        old_o, old_n = seen.get(p, (-1, 0))
        seen[p] = (max(old_o, o), old_n + n)


class Layout(NamedTuple):
    """Where and how a topic's rows go: the target table, the rows (with the key's fields and
    Kafka's coordinates as columns where the config asks), the columns written and the key."""

    table: tuple[str, ...]
    df: DataFrame
    columns: list[str]
    keys: list[str]
    from_key: list[str]
    #: how the topic's columns changed since the sink's last run (`SinkBatch.schema_changes`), for
    #: `schema.propagation` (`targets._evolution`)
    changes: Mapping[str, Any] | None = None


def table_of(cfg: JdbcSinkConfig, target: str) -> tuple[str, ...]:
    """The table the records that name topic `target` (after routers) go to."""
    return parse_identifier(cfg.table_name_format.replace("${topic}", target), "table")


def layout(
    topic: str, df: DataFrame, cfg: JdbcSinkConfig, target: str, changes: Mapping[str, Any] | None = None
) -> Layout:
    """The layout of `topic`'s rows, whose records now name the topic `target` (after routers)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    table = table_of(cfg, target)
    values = [f.name for f in df.schema.fields if is_value_column(f.name)]
    if {"before", "after", "op"} <= set(values) and isinstance(df.schema["after"].dataType, StructType):
        raise ConfigError(
            f"topic `{topic}` holds change events in Debezium's envelope (before/after/op), not rows: add the "
            "ExtractNewRecordState transform (`transforms.unwrap.type=io.debezium.transforms.ExtractNewRecordState`)"
            " to write each event's row, and `delete.enabled=true` with `pk.mode=record_key` to apply deletes"
        )
    from_key: list[str] = []
    if cfg.pk_mode == "record_key":
        # The key's fields are the row's key columns, as in Kafka's JDBC sink: a value field of the
        # same name is not (a tombstone has no value at all).
        keys = key_fields(topic, df, list(cfg.pk_fields))
        from_key = list(keys)
        df = df.withColumns({k: F.col("__key").getField(k) for k in from_key})
        values += [k for k in keys if k not in values]
    elif cfg.pk_mode == "kafka":
        df = df.withColumns(
            {KAFKA_PK[0]: F.col("__topic"), KAFKA_PK[1]: F.col("__partition"), KAFKA_PK[2]: F.col("__offset")}
        )
        values += list(KAFKA_PK)
        keys = list(KAFKA_PK)
    else:
        keys = list(cfg.pk_fields)
    missing = [k for k in keys if k not in values]
    if missing:
        raise ConfigError(f"topic `{topic}` has no column(s) {missing} for `pk.fields`", {"pk.fields": missing})
    return Layout(table, df, values, keys, from_key, changes)


def next_offsets(reached: list[dict[str, Any]]) -> dict[int, int]:
    """The next offset of every topic partition the writers reached (their `p`, `o`, `n` rows)."""
    ends: dict[int, int] = {}
    for row in reached:
        if row["n"]:
            ends[row["p"]] = max(ends.get(row["p"], -1), row["o"] + 1)
    return dict(sorted(ends.items()))


def key_fields(topic: str, df: DataFrame, wanted: list[str]) -> list[str]:
    """`pk.mode=record_key`: the key's fields (or the `wanted` ones among them)."""
    from pyspark.sql.types import StructType

    kind = df.schema["__key"].dataType if "__key" in df.columns else None
    if not isinstance(kind, StructType):
        raise ConfigError(
            f"`pk.mode` record_key: the records of topic `{topic}` have no struct key (a source sets one, or the "
            "ValueToKey transform)",
            {"pk.mode": ["the records have no struct key"]},
        )
    have = kind.fieldNames()
    missing = [k for k in wanted if k not in have]
    if missing:
        raise ConfigError(f"`pk.fields` {missing} are not fields of the records' key ({', '.join(have)})")
    return wanted or have
