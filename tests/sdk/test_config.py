from __future__ import annotations

import pytest
from pydantic import ValidationError

from connect_core.sdk import SinkConnectorConfig, partition_key


def test_topics_accept_list_or_comma_string() -> None:
    a = SinkConnectorConfig.model_validate({"connector.class": "X", "connect.topicnames": "a, b,,c"})
    b = SinkConnectorConfig.model_validate({"connector.class": "X", "topics": ["a", "b", "c"]})
    assert a.topics == b.topics == ["a", "b", "c"]


def test_tasks_max_must_be_positive() -> None:
    with pytest.raises(ValidationError):
        SinkConnectorConfig.model_validate({"connector.class": "X", "topics": "t", "tasks.max": 0})


def test_partition_key_is_canonical() -> None:
    assert partition_key({"b": 1, "a": "x"}) == partition_key({"a": "x", "b": 1})
