"""A SQL query over each batch, as SeaTunnel's SQL transform: `SELECT id, upper(name) AS name FROM __THIS__`.

`__THIS__` (a whole word, in capitals) stands for the batch. The query runs on Spark, so it may
aggregate, join the batch with itself or drop rows; it takes no predicate, and a connector with it
runs its transforms on Spark even where the batch was read as Arrow.

The output is what the query selects, record parts included: a row keeps its key, headers,
timestamp, tombstone flag, topic (and a sink's partition and offset) only if the query selects
them, by `*` or by name (`SELECT *, upper(name) AS shout FROM __THIS__`). Parts it leaves out are
null afterwards; without `__topic` a record goes to the connector's topic.

The query is Spark SQL run with the worker's rights, so it must be a pure query over `__THIS__`:
at create, and again before every run, it is parsed and walked node by node against allow-lists
(`_sqlcheck`; the functions in `_sqlfunctions`); where it runs on a classic session its analysed
plan is walked too, before anything executes (`_sqlplan`). Commands, writes, files, tables, Java
calls, scripts and UDFs are refused, with the part that was. On Spark Connect (no JVM here) the
parse is the check, and the session must read no file by its path (`spark.sql.runSQLOnFiles=false`).
"""

from __future__ import annotations

import re
import uuid
from typing import TYPE_CHECKING, Any, NoReturn

from pydantic import Field, field_validator

from connect_core.sdk import is_connect
from connect_core.sdk.errors import ConfigError
from connect_core.sdk.transforms import Transformation, TransformConfig
from connect_core.transforms._sqlcheck import BATCH, RefusedQuery, check_query
from connect_core.transforms._sqlplan import check_analysed_plan

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["SqlTransform"]

_THIS = re.compile(rf"\b{BATCH}\b")


class SqlTransformConfig(TransformConfig):
    query: str = Field(
        description=(
            "A Spark SQL query over the batch, named `__THIS__` (e.g. `SELECT *, upper(name) AS name_uc FROM "
            "__THIS__`). Select the record parts (`__key`, `__headers`, `__timestamp`, `__tombstone`, `__topic`) "
            "or `*` to keep them."
        )
    )

    @field_validator("query")
    @classmethod
    def _query(cls, value: str) -> str:
        check_query(value)  # a RefusedQuery is a ValueError: the 400 lists it under `query`
        return value


def _checked(query: str) -> str:
    """The parse check before a run (a stored config may predate it): the query Spark is to run, as
    sqlglot generates it from the tree it checked."""
    try:
        return check_query(query)
    except RefusedQuery as exc:
        raise ConfigError(f"the SQL transform's query {exc}", {"query": [str(exc)]}) from exc


def _files_off(spark: SparkSession) -> None:
    """On Spark Connect the session's SQL settings are the server's defaults unless the client set
    them (the runner sets `spark.sql.runSQLOnFiles=false` on every run's session): a session that
    would let the query read files by their path is refused rather than trusted."""
    if str(spark.conf.get("spark.sql.runSQLOnFiles")).lower() != "false":
        raise ConfigError(
            "the SQL transform runs only where SQL cannot read files by their path: set "
            "`spark.sql.runSQLOnFiles=false` on the Spark Connect session (every runner's session has it)",
            {"query": ["would run where SQL reads files by their path"]},
        )
    if str(spark.conf.get("spark.sql.variable.substitute")).lower() != "false":
        raise ConfigError(
            "the SQL transform runs only where SQL fills in no `${…}` variables: set "
            "`spark.sql.variable.substitute=false` on the Spark Connect session (every runner's session has it)",
            {"query": ["would run where SQL fills in `${…}` variables"]},
        )


class SqlTransform(Transformation[SqlTransformConfig]):
    config_model = SqlTransformConfig
    whole_batch = True
    doc = "Run a Spark SQL query over each batch (`__THIS__`), as SeaTunnel's SQL transform."

    def spark_frame(self, df: DataFrame) -> DataFrame:
        # before Spark sees any text (a command runs as it is parsed); what Spark gets is the checked
        # tree's text, not the user's
        checked = _checked(self.config.query)
        spark = df.sparkSession
        if is_connect(spark):
            _files_off(spark)
            # `sql` with a DataFrame argument: the server names the batch for this query only; braces
            # of the query itself are doubled so that only `{this}` is a placeholder
            query = checked.replace("{", "{{").replace("}", "}}")
            return spark.sql(_THIS.sub("{this}", query), this=df)
        return self._classic_frame(spark, df, checked)

    def _classic_frame(self, spark: SparkSession, df: DataFrame, checked: str) -> DataFrame:
        """The query on a classic session: the batch as a temporary view of its own name, the plan
        analysed (not executed) and walked, and only then the DataFrame made."""
        view = f"_connect_batch_{uuid.uuid4().hex}"
        text = _THIS.sub(view, checked)
        df.createOrReplaceTempView(view)
        try:
            jspark = spark._jsparkSession
            parsed = jspark.sessionState().sqlParser().parsePlan(text)
            jvm: Any = spark._jvm
            skip = jvm.org.apache.spark.sql.execution.CommandExecutionMode.SKIP()
            analysed = jspark.sessionState().executePlan(parsed, skip).analyzed()
            check_analysed_plan(spark, analysed, view)
            return spark.sql(text)  # analysed here, while the view exists
        finally:
            spark.catalog.dropTempView(view)

    def spark(self, df: DataFrame) -> dict[str, Column]:
        self._whole_batch()

    def arrow(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        self._whole_batch()

    @staticmethod
    def _whole_batch() -> NoReturn:
        raise NotImplementedError("SqlTransform is a query over the whole batch: the runtime calls `spark_frame`")
