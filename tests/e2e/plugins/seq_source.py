"""A test source: each task counts upwards on its own, rows (task, n), `step` rows per run."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from connect_core import ConnectorConfig, SourceBatch, SourceConnector, SourcePosition, SourceTask


class SeqConfig(ConnectorConfig):
    topic: str = Field(description="Topic to write to.")
    step: int = Field(default=10, ge=1, description="Rows per task and micro-batch.")


class SeqTask(SourceTask):
    def read(self, spark: Any, positions: Any) -> SourceBatch:
        from pyspark.sql import functions as F

        partition = {"seq": self.context.task_id}
        start = (positions.offset(partition) or {}).get("next", 0)
        end = start + int(self.config["step"])
        df = spark.range(start, end).select(F.lit(self.context.task_id).alias("task"), F.col("id").alias("n"))
        return SourceBatch({self.config["topic"]: df}, (SourcePosition(partition, {"next": end}),))


class SeqSource(SourceConnector[SeqConfig]):
    config_model = SeqConfig
    task_class = SeqTask

    def task_configs(self, config: SeqConfig, max_tasks: int) -> list[dict[str, Any]]:
        return [{"topic": config.topic, "step": config.step} for _ in range(max_tasks)]
