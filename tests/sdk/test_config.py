from __future__ import annotations

import pytest
from pydantic import ValidationError

from connect_core.sdk import ConnectorConfig, SinkConnectorConfig, partition_key
from connect_core.sdk.config import check_topic_name


def test_topics_accept_list_or_comma_string() -> None:
    a = SinkConnectorConfig.model_validate({"connector.class": "X", "connect.topicnames": "a, b,,c"})
    b = SinkConnectorConfig.model_validate({"connector.class": "X", "topics": ["a", "b", "c"]})
    assert a.topics == b.topics == ["a", "b", "c"]


def test_tasks_max_must_be_positive() -> None:
    with pytest.raises(ValidationError):
        SinkConnectorConfig.model_validate({"connector.class": "X", "topics": "t", "tasks.max": 0})


def test_partition_key_is_canonical() -> None:
    assert partition_key({"b": 1, "a": "x"}) == partition_key({"a": "x", "b": 1})


@pytest.mark.parametrize(
    "schedule",
    ["none", "None", "", None, "30s", "15m", "2h", "1d", "@hourly", "@quarterly", "@continuous", "*/5 * * * *"],
)
def test_schedules_airflow_can_run_are_accepted(schedule: str | None) -> None:
    ConnectorConfig.model_validate({"connector.class": "X", "schedule": schedule})


@pytest.mark.parametrize(
    "schedule",
    ["every tuesday", "61 * * * *", "* * * * * *", "@weird", "0m", "99999d", "1w", "٣m", "@" + "x" * 500],
)
def test_schedules_airflow_cannot_run_are_rejected_at_create(schedule: str) -> None:
    with pytest.raises(ValidationError) as err:
        ConnectorConfig.model_validate({"connector.class": "X", "schedule": schedule})
    (problem,) = err.value.errors()
    assert problem["loc"] == ("schedule",)
    assert "`15m`" in problem["msg"] or "between 1s" in problem["msg"] or "characters long" in problem["msg"]


@pytest.mark.parametrize("schedule", ["@continuous", "@once"])
def test_a_sink_cannot_run_continuously_on_top_of_its_topics(schedule: str) -> None:
    with pytest.raises(ValidationError, match="its topics"):
        SinkConnectorConfig.model_validate({"connector.class": "X", "topics": "t", "schedule": schedule})


def test_topic_names_follow_kafkas_rule() -> None:
    ok = SinkConnectorConfig.model_validate({"connector.class": "X", "topics": ["a.b_c-D9", "x" * 249]})
    assert ok.topics[0] == "a.b_c-D9"
    with pytest.raises(ValidationError) as err:
        SinkConnectorConfig.model_validate({"connector.class": "X", "topics": ["a b", "c/d", "x" * 250, "é", "a\x00"]})
    assert [e["loc"] for e in err.value.errors()] == [("topics", i) for i in range(5)]
    assert "only ASCII letters, digits, `.`, `_` and `-`" in err.value.errors()[0]["msg"]
    assert check_topic_name("ok") == "ok"
