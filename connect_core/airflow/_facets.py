"""What a Connect task tells Airflow about its data: OpenLineage datasets and topic Asset extras.

Computed from the library's records (`runtime.lineage`, the segments a run committed); the operator
only hands them over.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from connect_core.runtime.lineage import Dataset, Masked, RunLineage
from connect_core.runtime.topics.store import Segment

__all__ = ["operator_lineage", "topic_extras"]


def operator_lineage(found: RunLineage) -> Any:
    """The run's datasets as the OpenLineage provider's `OperatorLineage`: rows written and columns,
    topics as datasets of their own. A column whose values were hidden on the way says how in its
    schema field's description, and, for what the run wrote, in the column lineage facet: a
    transformation with `masking` true, from the column it was read from where that is known (else
    the facet's older `transformationType` MASKED)."""
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import InputDataset, OutputDataset
    from openlineage.client.facet_v2 import output_statistics_output_dataset as statistics
    from openlineage.client.facet_v2 import schema_dataset

    def facets(d: Dataset, written: bool = False) -> dict[str, Any]:
        found: dict[str, Any] = {}
        how = {m.field: m.how for m in d.masked}
        if d.fields is not None:
            fields = [
                schema_dataset.SchemaDatasetFacetFields(name=f.name, type=f.type, description=_masked_text(how, f.name))
                for f in d.fields
            ]
            found["schema"] = schema_dataset.SchemaDatasetFacet(fields=fields)
        if written and d.masked:
            found["columnLineage"] = column_lineage(d.masked)
        return found

    outputs = [
        OutputDataset(
            d.namespace,
            d.name,
            {"outputStatistics": statistics.OutputStatisticsOutputDatasetFacet(rowCount=d.rows)}
            if d.rows is not None
            else {},
            facets=facets(d, written=True),
        )
        for d in found.outputs
    ]
    inputs = [InputDataset(d.namespace, d.name, facets=facets(d)) for d in found.inputs]
    return OperatorLineage(inputs=inputs, outputs=outputs)


def _masked_text(how: dict[str, str], name: str) -> str | None:
    """What a schema field's description says of the values hidden in it (or in its struct's fields)."""
    notes = [f"`{field}`: {note}" for field, note in how.items() if field == name or field.startswith(f"{name}.")]
    return "masked: " + "; ".join(notes) if notes else None


def column_lineage(masked: Sequence[Masked]) -> Any:
    """OpenLineage's column lineage facet for the columns in `masked`: each from its origin column
    through a masking transformation (its description says how, never with the salt or key)."""
    from openlineage.client.facet_v2 import column_lineage_dataset as cl

    fields = {}
    for m in masked:
        change = cl.Transformation(type="DIRECT", subtype="TRANSFORMATION", description=m.how, masking=True)
        if m.origin is not None:
            namespace, name, column = m.origin
            fields[m.field] = cl.Fields(
                inputFields=[cl.InputField(namespace, name, column, transformations=[change])],
                transformationDescription=m.how,
                transformationType="MASKED",
            )
        else:
            fields[m.field] = cl.Fields(inputFields=[], transformationDescription=m.how, transformationType="MASKED")
    return cl.ColumnLineageDatasetFacet(fields=fields)


def topic_extras(landed: Sequence[Segment]) -> dict[str, dict[str, Any]]:
    """Per topic, what a run landed in it: its rows and `[first offset, end offset)` per partition."""
    extras: dict[str, dict[str, Any]] = {}
    for s in landed:
        extra = extras.setdefault(s.topic, {"rows": 0, "offsets": {}})
        extra["rows"] += s.row_count
        span = extra["offsets"].setdefault(str(s.partition), [s.start_offset, s.end_offset])
        span[0], span[1] = min(span[0], s.start_offset), max(span[1], s.end_offset)
    return extras
