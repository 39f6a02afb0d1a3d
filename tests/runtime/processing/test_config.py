"""Kafka's `transforms` / `predicates` keys: parsed into a chain, every problem reported by key."""

from __future__ import annotations

import pytest

from connect_core.runtime.plugins import PluginRegistry
from connect_core.runtime.processing.config import build_chain, problems
from connect_core.sdk.errors import ConfigError
from connect_core.transforms.fields import InsertFieldValue
from connect_core.transforms.filter import Filter
from connect_core.transforms.predicates import TopicNameMatches

#: Kafka's documentation, "Predicates" (a Kafka Connect config, unchanged).
KAFKA_EXAMPLE = {
    "transforms": "Filter,Extract",
    "transforms.Filter.type": "org.apache.kafka.connect.transforms.Filter",
    "transforms.Filter.predicate": "IsFoo",
    "transforms.Extract.type": "org.apache.kafka.connect.transforms.ExtractField$Key",
    "transforms.Extract.field": "other_field",
    "transforms.Extract.predicate": "IsBar",
    "transforms.Extract.negate": "true",
    "predicates": "IsFoo,IsBar",
    "predicates.IsFoo.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
    "predicates.IsFoo.pattern": "foo",
    "predicates.IsBar.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
    "predicates.IsBar.pattern": "bar",
}


@pytest.fixture(scope="module")
def registry() -> PluginRegistry:
    return PluginRegistry()


def test_kafka_documentation_example_builds_its_chain(registry: PluginRegistry) -> None:
    chain = build_chain(KAFKA_EXAMPLE, registry)
    assert [s.alias for s in chain.steps] == ["Filter", "Extract"]
    first, second = chain.steps
    assert isinstance(first.transform, Filter) and isinstance(first.predicate, TopicNameMatches)
    assert (first.negate, second.negate) == (False, True)
    assert type(second.transform).__name__ == "ExtractFieldKey"


def test_short_names_and_class_paths_work_too(registry: PluginRegistry) -> None:
    for type_name in ("InsertField$Value", "connect_core.transforms.fields.InsertFieldValue"):
        chain = build_chain(
            {"transforms": ["a"], "transforms.a.type": type_name, "transforms.a.static.field": "x"}, registry
        )
        assert isinstance(chain.steps[0].transform, InsertFieldValue)


def test_no_transforms_is_an_empty_chain(registry: PluginRegistry) -> None:
    assert not build_chain({"connector.class": "X"}, registry)


def test_every_problem_is_reported_by_its_key(registry: PluginRegistry) -> None:
    found = problems(
        {
            "transforms": "noType,unknown,badRegex,orphan,lonely",
            "transforms.unknown.type": "org.example.Nope",
            "transforms.badRegex.type": "org.apache.kafka.connect.transforms.RegexRouter",
            "transforms.badRegex.regex": "(unclosed",
            "transforms.badRegex.replacement": "$1",
            "transforms.orphan.type": "Filter",
            "transforms.orphan.predicate": "undeclared",
            "transforms.lonely.type": "Filter",
            "transforms.lonely.negate": "maybe",
            "predicates.stray.type": "TopicNameMatches",
        },
        registry,
    )
    assert "Missing required configuration `transforms.noType.type`" in found["transforms.noType.type"][0]
    assert (
        "not found" in found["transforms.unknown.type"][0]
        and "InsertField$Value" in found["transforms.unknown.type"][0]
    )
    assert found["transforms.badRegex.regex"]
    assert "not declared" in found["transforms.orphan.predicate"][0]
    assert found["transforms.lonely.negate"] == ["must be `true` or `false`"]
    assert "not listed in `predicates`" in found["predicates.stray.type"][0]


def test_build_chain_raises_with_the_same_errors(registry: PluginRegistry) -> None:
    with pytest.raises(ConfigError) as caught:
        build_chain({"transforms": "a"}, registry)
    assert set(caught.value.errors) == {"transforms.a.type"}


def test_transforms_and_predicates_are_listed(registry: PluginRegistry) -> None:
    transforms, predicates = registry.transforms(), registry.predicates()
    kafka = {
        "Cast$Key", "Cast$Value", "DropHeaders", "ExtractField$Key", "ExtractField$Value", "Filter", "Flatten$Key",
        "Flatten$Value", "HeaderFrom$Key", "HeaderFrom$Value", "HoistField$Key", "HoistField$Value",
        "InsertField$Key", "InsertField$Value", "InsertHeader", "MaskField$Key", "MaskField$Value", "RegexRouter",
        "ReplaceField$Key", "ReplaceField$Value", "SetSchemaMetadata$Key", "SetSchemaMetadata$Value",
        "TimestampConverter$Key", "TimestampConverter$Value", "TimestampRouter", "ValueToKey",
    }  # fmt: skip
    assert kafka | {"SqlTransform"} <= set(transforms)
    assert {"TopicNameMatches", "HasHeaderKey", "RecordIsTombstone"} <= set(predicates)
    assert transforms["Cast$Value"].aliases == ["org.apache.kafka.connect.transforms.Cast$Value"]
    assert predicates["HasHeaderKey"].type == "predicate"
