"""What a Connect task tells Airflow about its data: OpenLineage datasets and topic Asset extras.

Computed from the library's records (`runtime.lineage`, the segments a run committed); the operator
only hands them over.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from connect_core.runtime.lineage import Dataset, RunLineage
from connect_core.runtime.topics.store import Segment

__all__ = ["operator_lineage", "topic_extras"]


def operator_lineage(found: RunLineage) -> Any:
    """The run's datasets as the OpenLineage provider's `OperatorLineage`: rows written and columns,
    topics as datasets of their own."""
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import InputDataset, OutputDataset
    from openlineage.client.facet_v2 import output_statistics_output_dataset as statistics
    from openlineage.client.facet_v2 import schema_dataset

    def facets(d: Dataset) -> dict[str, Any]:
        if d.fields is None:
            return {}
        fields = [schema_dataset.SchemaDatasetFacetFields(name=f.name, type=f.type) for f in d.fields]
        return {"schema": schema_dataset.SchemaDatasetFacet(fields=fields)}

    outputs = [
        OutputDataset(
            d.namespace,
            d.name,
            {"outputStatistics": statistics.OutputStatisticsOutputDatasetFacet(rowCount=d.rows)}
            if d.rows is not None
            else {},
            facets=facets(d),
        )
        for d in found.outputs
    ]
    inputs = [InputDataset(d.namespace, d.name, facets=facets(d)) for d in found.inputs]
    return OperatorLineage(inputs=inputs, outputs=outputs)


def topic_extras(landed: Sequence[Segment]) -> dict[str, dict[str, Any]]:
    """Per topic, what a run landed in it: its rows and `[first offset, end offset)` per partition."""
    extras: dict[str, dict[str, Any]] = {}
    for s in landed:
        extra = extras.setdefault(s.topic, {"rows": 0, "offsets": {}})
        extra["rows"] += s.row_count
        span = extra["offsets"].setdefault(str(s.partition), [s.start_offset, s.end_offset])
        span[0], span[1] = min(span[0], s.start_offset), max(span[1], s.end_offset)
    return extras
