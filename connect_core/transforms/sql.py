"""A SQL query over each batch, as SeaTunnel's SQL transform: `SELECT id, upper(name) AS name FROM __THIS__`.

`__THIS__` (a whole word, in capitals) stands for the batch. The query runs on Spark, so it may
aggregate, join the batch with itself or drop rows; it takes no predicate, and a connector with it
runs its transforms on Spark even where the batch was read as Arrow.

The output is what the query selects, record parts included: a row keeps its key, headers,
timestamp, tombstone flag, topic (and a sink's partition and offset) only if the query selects
them, by `*` or by name (`SELECT *, upper(name) AS shout FROM __THIS__`). Parts it leaves out are
null afterwards; without `__topic` a record goes to the connector's topic.

The query is Spark SQL run with the worker's rights: it is refused if it calls Java methods
(`reflect`, `java_method`) or reads files by path (``parquet.`/some/path` ``). Config validation
cannot parse it without Spark: it checks that it is a query (SELECT or WITH) naming `__THIS__`; a
query Spark cannot run fails the batch.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, NoReturn

from pydantic import Field, field_validator

from connect_core.sdk import is_connect
from connect_core.sdk.errors import ConfigError
from connect_core.sdk.transforms import Transformation, TransformConfig

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

__all__ = ["SqlTransform"]

_THIS = re.compile(r"\b__THIS__\b")
_QUERY = re.compile(r"\s*(?:\(\s*)*(?:SELECT|WITH)\b", re.IGNORECASE)
#: What a query over the batch has no need of (a best effort: Spark's `spark.sql.runSQLOnFiles=false`
#: is what closes file reads for good): calls into the JVM, relations reading a file by its path
#: (``csv.`/etc/x` ``, `` parquet.`data.parquet` ``) and identifiers built from strings.
_FORBIDDEN = (
    (re.compile(r"\b(?:try_)?reflect\s*\(|\bjava_method\s*\(", re.IGNORECASE), "calls Java methods"),
    (
        re.compile(r"\b(?:parquet|csv|json|orc|text|avro|binaryfile|xml|delta|jdbc)\s*\.\s*`", re.IGNORECASE),
        "reads a file by its path",
    ),
    (re.compile(r"\bidentifier\s*\(", re.IGNORECASE), "builds an identifier from a string (IDENTIFIER)"),
)
_QUOTED = re.compile(r"`((?:[^`]|``)*)`")
#: How an analysed plan prints a call through reflection (`CallMethodViaReflection`).
_CALLS_JAVA = re.compile(r"\b(?:try_)?(?:reflect|java_method)\(", re.IGNORECASE)
#: The analysed plan's section of an extended EXPLAIN (Spark Connect's only view of it).
_ANALYSED = re.compile(r"== Analyzed Logical Plan ==\n(.*?)\n== Optimized Logical Plan ==", re.DOTALL)


def _refused(query: str) -> str | None:
    """What the query does that it may not, or None."""
    for pattern, what in _FORBIDDEN:
        if pattern.search(query):
            return what
    if any(re.search(r"[/\\]", name) for name in _QUOTED.findall(query)):
        return "reads a file by its path"
    return None


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
        if not _QUERY.match(value):
            raise ValueError("must be a query: start with SELECT or WITH")
        if not _THIS.search(value):
            raise ValueError("must read the batch as `__THIS__` (e.g. `SELECT * FROM __THIS__`)")
        refused = _refused(value)
        if refused:
            raise ValueError(f"is refused: it {refused}")
        return value


def _analysed_plan(df: DataFrame) -> str:
    """The text of `df`'s analysed logical plan: from the JVM on a classic session; on Spark Connect
    (no JVM here), the server's extended EXPLAIN, whose section of that name is the same text.

    On Spark Connect the session's SQL settings are the server's defaults unless the client set them
    (the runner sets `spark.sql.runSQLOnFiles=false` on every run's session): a session that would
    let the query read files by their path is refused here rather than trusted."""
    spark = df.sparkSession
    if not is_connect(spark):
        return str(df._jdf.queryExecution().analyzed().toString())
    if str(spark.conf.get("spark.sql.runSQLOnFiles")).lower() != "false":
        raise ConfigError(
            "the SQL transform runs only where SQL cannot read files by their path: set "
            "`spark.sql.runSQLOnFiles=false` on the Spark Connect session (every runner's session has it)",
            {"query": ["would run where SQL reads files by their path"]},
        )
    explained: Any = df
    text = str(explained._explain_string(mode="extended"))
    found = _ANALYSED.search(text)
    return found.group(1) if found else text  # unknown layout: the whole text, every plan in it


class SqlTransform(Transformation[SqlTransformConfig]):
    config_model = SqlTransformConfig
    whole_batch = True
    doc = "Run a Spark SQL query over each batch (`__THIS__`), as SeaTunnel's SQL transform."

    def spark_frame(self, df: DataFrame) -> DataFrame:
        # `sql` with a DataFrame argument: Spark names the batch for this one query only (a temporary
        # view it drops once the query is analysed, or a plan reference on Spark Connect); braces of
        # the query itself are doubled so that only `{this}` is a placeholder
        query = self.config.query.replace("{", "{{").replace("}", "}}")
        out = df.sparkSession.sql(_THIS.sub("{this}", query), this=df)
        # The text check at create is a best effort (a function name can be quoted, `reflect`(…)); the
        # analysed plan names what the query really calls. (File reads are off in every runner's
        # session: `spark.sql.runSQLOnFiles=false`.)
        if _CALLS_JAVA.search(_analysed_plan(out)):
            raise ConfigError(
                "the SQL transform's query calls Java methods (reflect/java_method): refused",
                {"query": ["calls Java methods"]},
            )
        return out

    def spark(self, df: DataFrame) -> dict[str, Column]:
        self._whole_batch()

    def arrow(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        self._whole_batch()

    @staticmethod
    def _whole_batch() -> NoReturn:
        raise NotImplementedError("SqlTransform is a query over the whole batch: the runtime calls `spark_frame`")
