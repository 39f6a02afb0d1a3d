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
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy import text

from connect_core.runtime.context import Runtime
from connect_core.runtime.store.states import RunState
from connect_core.runtime.topics.files import SPARK_SCHEMA_KEY
from connect_core.sdk.connector import LineageDataset
from connect_core.sdk.transforms import is_value_column

__all__ = ["Dataset", "Field", "RunLineage", "run_lineage"]


@dataclass(frozen=True)
class Field:
    name: str
    type: str  # Spark's simple type string; Arrow's where a file has no Spark schema


@dataclass(frozen=True)
class Dataset:
    namespace: str
    name: str
    rows: int | None = None  # what the run wrote to it (outputs only)
    fields: tuple[Field, ...] | None = None  # its columns; None when not known


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
    if info.type == "source":
        written: dict[str, int] = {}
        paths: dict[str, list[str]] = {}
        for segment in runtime.topics.run_segments(run["run_id"]) if run else []:
            written[segment.topic] = written.get(segment.topic, 0) + segment.row_count
            paths.setdefault(segment.topic, []).append(segment.path)
        own = sorted(plugin.output_topics(config))
        topics = sorted(set(own) | set(written))
        fields = {t: _segments_fields(p) for t, p in paths.items()}
        outputs = [Dataset(topics_ns, t, written.get(t, 0) if run else None, fields.get(t)) for t in topics]
        dead_letters = info.config.get("errors.deadletterqueue.topic.name")
        inputs = _external(named, own or sorted(set(written) - {dead_letters}), fields, transformed, None)
        return RunLineage(inputs, outputs, run["run_id"] if run else None)
    rows = int(run["stats"].get("rows", 0)) if run else None
    read = list(getattr(config, "topics", []))
    fields = _newest_fields(runtime, read)
    inputs = [Dataset(topics_ns, t, fields=fields.get(t)) for t in read]
    outputs = _external(named, read, fields, transformed, rows if len(named) == 1 else None)
    return RunLineage(inputs, outputs, run["run_id"] if run else None)


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


def _newest_fields(runtime: Runtime, topics: Iterable[str]) -> dict[str, tuple[Field, ...] | None]:
    """Each topic's fields, from its newest segment (one footer per topic)."""
    wanted = sorted(set(topics))
    if not wanted:
        return {}
    query = text(
        "SELECT DISTINCT ON (topic) topic, path FROM connect.topic_segments "
        "WHERE topic = ANY(:topics) ORDER BY topic, id DESC"
    )
    with runtime.engine.connect() as conn:
        newest: dict[str, str] = {t: p for t, p in conn.execute(query, {"topics": wanted})}
    return {t: _segments_fields([newest[t]]) if t in newest else None for t in wanted}


def _segments_fields(paths: Sequence[str]) -> tuple[Field, ...] | None:
    """The value columns of segments at `paths`, in the order first seen; None when any is unknown."""
    found = []
    for path in paths:
        one = _segment_fields(path)
        if one is None:
            return None
        found.append(one)
    return _merged(found)


def _merged(parts: Sequence[tuple[Field, ...] | None]) -> tuple[Field, ...] | None:
    """Fields of several datasets as one (as `unionByName` joins them): by name, the first type wins."""
    if not parts or any(p is None for p in parts):
        return None
    seen: dict[str, Field] = {}
    for part in parts:
        for f in part or ():
            seen.setdefault(f.name, f)
    return tuple(seen.values())


def _segment_fields(path: str) -> tuple[Field, ...] | None:
    """A segment's value columns from the footer of one of its Parquet files (no data is read); None
    when it is not on a local path or has no readable file."""
    local = path[len("file://") :] if path.startswith("file://") else path
    if "://" in local:
        return None
    try:
        first = min(Path(local).glob("*.parquet"), default=None)
        if first is None:
            return None
        schema = pq.read_schema(first)
    except (OSError, pa.ArrowException):
        return None
    stored = (schema.metadata or {}).get(SPARK_SCHEMA_KEY)
    typed = _spark_types(stored) if stored else None
    pairs = typed if typed is not None else [(f.name, str(f.type)) for f in schema]
    return tuple(Field(name, kind) for name, kind in pairs if is_value_column(name))


def _spark_types(stored: bytes) -> list[tuple[str, str]] | None:
    """(name, Spark simple type string) of each column of a Spark schema's JSON; None if unreadable."""
    try:
        from pyspark.sql.types import StructType

        struct = StructType.fromJson(json.loads(stored))
    except (ImportError, ValueError, KeyError, TypeError):
        return None
    return [(f.name, f.dataType.simpleString()) for f in struct.fields]
