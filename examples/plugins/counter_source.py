"""The connector of the README's authoring guide: counts upwards, `step` rows per run."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from connect_core import ConnectorConfig, SourceBatch, SourceConnector, SourcePosition, SourceTask


class CounterConfig(ConnectorConfig):
    topic: str = Field(description="Topic to write to.")
    step: int = Field(default=10, ge=1, description="Rows per micro-batch.")


class CounterTask(SourceTask):
    def read(self, spark: Any, positions: Any) -> SourceBatch:
        partition = {"counter": self.context.task_id}
        start = (positions.offset(partition) or {}).get("next", 0)
        end = start + int(self.config["step"])
        df = spark.range(start, end).withColumnRenamed("id", "n")
        return SourceBatch({self.config["topic"]: df}, (SourcePosition(partition, {"next": end}),))


class CounterSource(SourceConnector[CounterConfig]):
    config_model = CounterConfig
    task_class = CounterTask

    def task_configs(self, config: CounterConfig, max_tasks: int) -> list[dict[str, Any]]:
        return [{"topic": config.topic, "step": config.step} for _ in range(max_tasks)]
