"""What a task's last run read and wrote, as datasets: the lineage the Airflow layer reports.

A source reads the datasets its plugin names (`Connector.lineage`: tables, files) and writes its
topics; a sink reads its topics and writes its plugin's datasets. Topics are datasets of their
own namespace, `connect://<cluster id>` (the metadata database's identity), named by the topic.
Row counts are the run's: per topic from the segments it committed; a sink's rows on its one
target (unknown when it writes several). Names come from configs' hosts, ports, databases,
tables and paths only: never a credential.

Fields (OpenLineage's schema facet) are a topic's value columns, read from the Parquet footer of
one file of a segment: a source's topic from the segments its run committed, a sink's topic from
its newest segment. Only footers on a local path are read (no file system client, no database of
the connector's is opened for lineage); elsewhere the fields are unknown. A dataset outside the
runtime has its topic's fields when nothing changed them on the way: the connector has no
transforms, and the dataset is the topic's (`LineageDataset.topic`, or the only dataset and the
only topic). Types are Spark's simple type strings (`string`, `bigint`, `decimal(10,2)`).

Masked columns (`Masked`) say which columns' values were hidden on the way, and how, never with
the salt or key: those a source's column masks hid, from the topic's schema (its fields' metadata
`connect.masked`, a change event's as `after.email`), and those a connector's transforms hide
(`Transformation.column_notes`: HashField's), from its config.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy import text

from connect_core.runtime.context import Runtime
from connect_core.runtime.processing.config import build_chain
from connect_core.runtime.store.states import RunState
from connect_core.runtime.topics.files import SPARK_SCHEMA_KEY
from connect_core.sdk.connector import LineageDataset
from connect_core.sdk.errors import ConfigError
from connect_core.sdk.transforms import KEY_COLUMN, MASKED_METADATA, is_value_column

__all__ = ["Dataset", "Field", "Masked", "RunLineage", "run_lineage"]


@dataclass(frozen=True)
class Field:
    name: str
    type: str  # Spark's simple type string; Arrow's where a file has no Spark schema


@dataclass(frozen=True)
class Masked:
    """A column whose values were hidden on the way in (never the salt or the key)."""

    field: str  # `email`; a change event's `after.email`; a key's `__key.id`
    how: str  # `hash SHA-256 of salt + value (hex)`, `HMAC-SHA256 (hex), transform `pii``
    #: the column it was read from: (namespace, dataset, column), when the dataset is known
    origin: tuple[str, str, str] | None = None


@dataclass(frozen=True)
class Dataset:
    namespace: str
    name: str
    rows: int | None = None  # what the run wrote to it (outputs only)
    fields: tuple[Field, ...] | None = None  # its columns; None when not known
    masked: tuple[Masked, ...] = ()  # its columns whose values were hidden on the way in


@dataclass(frozen=True)
class RunLineage:
    inputs: list[Dataset] = field(default_factory=list)
    outputs: list[Dataset] = field(default_factory=list)
    run_id: int | None = None


def run_lineage(runtime: Runtime, connector: str, task_id: int) -> RunLineage:
    """The lineage of task `task_id`'s last run of `connector` (its datasets when it has no run)."""
    info = runtime.connectors.get(connector)
    plugin_cls: Any = runtime.registry.resolve(info.connector_class).cls
    plugin = plugin_cls()
    config = plugin_cls.config_model.model_validate(info.config)  # as stored: secrets stay placeholders
    named: list[LineageDataset] = list(plugin.lineage(config))
    runs = runtime.connectors.last_runs(connector, 1, task_id)
    run = runs[0] if runs and runs[0]["state"] == RunState.SUCCEEDED else None
    topics_ns = f"connect://{runtime.topics.cluster_id()}"
    transformed = bool(str(info.config.get("transforms") or "").strip())
    hidden = _transform_notes(runtime, info.config) if transformed else ()
    if info.type == "source":
        written: dict[str, int] = {}
        paths: dict[str, list[str]] = {}
        for segment in runtime.topics.run_segments(run["run_id"]) if run else []:
            written[segment.topic] = written.get(segment.topic, 0) + segment.row_count
            paths.setdefault(segment.topic, []).append(segment.path)
        own = sorted(plugin.output_topics(config))
        topics = sorted(set(own) | set(written))
        found = {t: _segments_schema(p) for t, p in paths.items()}
        fields = {t: f for t, (f, _) in found.items()}
        dead_letters = info.config.get("errors.deadletterqueue.topic.name")
        mine = own or sorted(set(written) - {dead_letters})
        inputs = _external(named, mine, fields, transformed, None)
        outputs = [
            Dataset(
                topics_ns,
                t,
                written.get(t, 0) if run else None,
                fields.get(t),
                _traced((*found.get(t, (None, ()))[1], *hidden), _origin(named, mine, t)),
            )
            for t in topics
        ]
        return RunLineage(inputs, outputs, run["run_id"] if run else None)
    rows = int(run["stats"].get("rows", 0)) if run else None
    read = list(getattr(config, "topics", []))
    newest = _newest_schemas(runtime, read)
    fields = {t: f for t, (f, _) in newest.items()}
    inputs = [Dataset(topics_ns, t, fields=fields.get(t), masked=newest.get(t, (None, ()))[1]) for t in read]
    outputs = _external(named, read, fields, transformed, rows if len(named) == 1 else None)
    # what the topics hid is hidden in what the sink writes from them, and so is what its transforms hide
    carried = tuple(m for t in read for m in newest.get(t, (None, ()))[1])
    outputs = [dataclasses.replace(d, masked=(*carried, *hidden)) for d in outputs]
    return RunLineage(inputs, outputs, run["run_id"] if run else None)


def _transform_notes(runtime: Runtime, config: dict[str, Any]) -> tuple[Masked, ...]:
    """The fields the connector's transforms hide (`column_notes`), from its stored config."""
    try:
        chain = build_chain(config, runtime.registry)
    except ConfigError:  # a config stored before a plugin changed: its lineage goes on without notes
        return ()
    found = []
    for step in chain.steps:
        where = ", where its predicate holds" if step.predicate is not None else ""
        for name, how in step.transform.column_notes().items():
            found.append(Masked(name, f"{how}, transform `{step.alias}`{where}"))
    return tuple(found)


def _origin(named: Sequence[LineageDataset], topics: Sequence[str], topic: str) -> LineageDataset | None:
    """The dataset outside the runtime a source's `topic` is copied from, when the connector says."""
    mine = [d for d in named if d.topic == topic]
    if not mine and len(named) == 1 and named[0].topic is None and list(topics) == [topic]:
        mine = list(named)
    return mine[0] if len(mine) == 1 else None


def _traced(masked: Sequence[Masked], origin: LineageDataset | None) -> tuple[Masked, ...]:
    """`masked` with the column each was read from, where the dataset is known (a value's field, or a
    change event row's field, has the table's column's name)."""
    if origin is None:
        return tuple(masked)
    return tuple(
        dataclasses.replace(m, origin=(origin.namespace, origin.name, m.field.rsplit(".", 1)[-1]))
        if not m.field.startswith(f"{KEY_COLUMN}.")
        else m
        for m in masked
    )


def _external(
    named: Sequence[LineageDataset],
    topics: Sequence[str],
    fields: dict[str, tuple[Field, ...] | None],
    transformed: bool,
    rows: int | None,
) -> list[Dataset]:
    """The connector's own datasets, each with its topic's fields where they are its own: no transform
    between them, and the dataset names its topic (or is the only one, with `topics` its topics)."""
    found = []
    for d in named:
        mine = [d.topic] if d.topic is not None else list(topics) if len(named) == 1 else []
        known = None if transformed or not mine else _merged([fields.get(t) for t in mine])
        found.append(Dataset(d.namespace, d.name, rows, known))
    return found


_Schema = tuple[tuple[Field, ...] | None, tuple[Masked, ...]]


def _newest_schemas(runtime: Runtime, topics: Iterable[str]) -> dict[str, _Schema]:
    """Each topic's fields and masked columns, from its newest segment (one footer per topic)."""
    wanted = sorted(set(topics))
    if not wanted:
        return {}
    query = text(
        "SELECT DISTINCT ON (topic) topic, path FROM connect.topic_segments "
        "WHERE topic = ANY(:topics) ORDER BY topic, id DESC"
    )
    with runtime.engine.connect() as conn:
        newest: dict[str, str] = {t: p for t, p in conn.execute(query, {"topics": wanted})}
    return {t: _segments_schema([newest[t]]) if t in newest else (None, ()) for t in wanted}


def _segments_schema(paths: Sequence[str]) -> _Schema:
    """The value columns of segments at `paths`, in the order first seen (None when any is unknown),
    and the columns they hid."""
    found = []
    masked: dict[str, Masked] = {}
    for path in paths:
        one, hidden = _segment_schema(path)
        masked.update((m.field, m) for m in hidden)
        if one is None:
            return None, tuple(masked.values())
        found.append(one)
    return _merged(found), tuple(masked.values())


def _merged(parts: Sequence[tuple[Field, ...] | None]) -> tuple[Field, ...] | None:
    """Fields of several datasets as one (as `unionByName` joins them): by name, the first type wins."""
    if not parts or any(p is None for p in parts):
        return None
    seen: dict[str, Field] = {}
    for part in parts:
        for f in part or ():
            seen.setdefault(f.name, f)
    return tuple(seen.values())


def _segment_schema(path: str) -> _Schema:
    """A segment's value columns from the footer of one of its Parquet files (no data is read; None
    when it is not on a local path or has no readable file), and the columns it hid."""
    local = path[len("file://") :] if path.startswith("file://") else path
    if "://" in local:
        return None, ()
    try:
        first = min(Path(local).glob("*.parquet"), default=None)
        if first is None:
            return None, ()
        schema = pq.read_schema(first)
    except (OSError, pa.ArrowException):
        return None, ()
    stored = (schema.metadata or {}).get(SPARK_SCHEMA_KEY)
    struct = _spark_schema(stored) if stored else None
    if struct is None:
        return tuple(Field(f.name, str(f.type)) for f in schema if is_value_column(f.name)), ()
    fields = tuple(Field(f.name, f.dataType.simpleString()) for f in struct.fields if is_value_column(f.name))
    return fields, _masked_fields(struct)


def _spark_schema(stored: bytes) -> Any:
    """The Spark schema of its JSON; None if unreadable."""
    try:
        from pyspark.sql.types import StructType

        return StructType.fromJson(json.loads(stored))
    except (ImportError, ValueError, KeyError, TypeError):
        return None


def _masked_fields(struct: Any) -> tuple[Masked, ...]:
    """The fields (and a struct column's fields, as `after.email`) whose metadata says they were hidden."""
    from pyspark.sql.types import StructType

    found = []
    for column in struct.fields:
        note = (column.metadata or {}).get(MASKED_METADATA)
        if note:
            found.append(Masked(column.name, str(note)))
        if isinstance(column.dataType, StructType):
            found += [
                Masked(f"{column.name}.{inner.name}", str(inner.metadata[MASKED_METADATA]))
                for inner in column.dataType.fields
                if (inner.metadata or {}).get(MASKED_METADATA)
            ]
    return tuple(found)
