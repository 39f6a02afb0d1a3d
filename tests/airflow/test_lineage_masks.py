"""What a run reports of the columns it hid, as OpenLineage facets: the column lineage facet's
masking transformation, from the column read where it is known, and the schema field's
description; never a salt or a key."""

from __future__ import annotations

from typing import Any

from openlineage.client.serde import Serde

from connect_core.airflow._facets import operator_lineage
from connect_core.runtime.lineage import Dataset, Field, Masked, RunLineage


def test_masked_columns_are_column_lineage_with_masking() -> None:
    table = ("postgres://db:5432", "shop.public.users")
    found = RunLineage(
        inputs=[Dataset(*table, fields=(Field("email", "string"),))],
        outputs=[
            Dataset(
                "connect://c1",
                "pg_users",
                rows=2,
                fields=(Field("id", "int"), Field("email", "string"), Field("after", "struct<ssn:string>")),
                masked=(
                    Masked("email", "hash SHA-256 of salt + value (hex)", (*table, "email")),
                    Masked("after.ssn", "mask with 4 `*`"),
                ),
            )
        ],
    )
    lineage = operator_lineage(found)
    (output,) = lineage.outputs
    facet: dict[str, Any] = Serde.to_dict(output.facets["columnLineage"])
    email = facet["fields"]["email"]
    (source,) = email["inputFields"]
    assert (source["namespace"], source["name"], source["field"]) == (*table, "email")
    assert source["transformations"] == [
        {
            "type": "DIRECT",
            "subtype": "TRANSFORMATION",
            "description": "hash SHA-256 of salt + value (hex)",
            "masking": True,
        }
    ]
    assert facet["fields"]["after.ssn"]["transformationType"] == "MASKED"
    schema = {f.name: f.description for f in output.facets["schema"].fields}
    assert schema == {
        "id": None,
        "email": "masked: `email`: hash SHA-256 of salt + value (hex)",
        "after": "masked: `after.ssn`: mask with 4 `*`",
    }
    assert "columnLineage" not in lineage.inputs[0].facets  # what was read is not what was hidden
