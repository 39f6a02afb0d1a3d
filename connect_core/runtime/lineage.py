"""What a task's last run read and wrote, as datasets: the lineage the Airflow layer reports.

A source reads the datasets its plugin names (`Connector.lineage`: tables, files) and writes its
topics; a sink reads its topics and writes its plugin's datasets. Topics are datasets of their
own namespace, `connect://<cluster id>` (the metadata database's identity), named by the topic.
Row counts are the run's: per topic from the segments it committed; a sink's rows on its one
target (unknown when it writes several). Names come from configs' hosts, ports, databases,
tables and paths only: never a credential.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from connect_core.runtime.context import Runtime

__all__ = ["Dataset", "RunLineage", "run_lineage"]


@dataclass(frozen=True)
class Dataset:
    namespace: str
    name: str
    rows: int | None = None  # what the run wrote to it (outputs only)


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
    external = [Dataset(d.namespace, d.name) for d in plugin.lineage(config)]
    runs = runtime.connectors.last_runs(connector, 1, task_id)
    run = runs[0] if runs and runs[0]["state"] == "SUCCEEDED" else None
    topics_ns = f"connect://{runtime.topics.cluster_id()}"
    if info.type == "source":
        written: dict[str, int] = {}
        for segment in runtime.topics.run_segments(run["run_id"]) if run else []:
            written[segment.topic] = written.get(segment.topic, 0) + segment.row_count
        topics = sorted(set(plugin.output_topics(config)) | set(written))
        outputs = [Dataset(topics_ns, t, written.get(t, 0) if run else None) for t in topics]
        return RunLineage(external, outputs, run["run_id"] if run else None)
    rows = int(run["stats"].get("rows", 0)) if run else None
    inputs = [Dataset(topics_ns, t) for t in getattr(config, "topics", [])]
    outputs = [Dataset(d.namespace, d.name, rows if len(external) == 1 else None) for d in external]
    return RunLineage(inputs, outputs, run["run_id"] if run else None)
