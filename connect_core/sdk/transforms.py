"""What a transformation or predicate plugin implements: Kafka Connect's Single Message Transforms,
over a whole batch at once.

A record is a row. Its **value** is the row's own columns; beside them a row carries Kafka's other
record parts in reserved columns (`RESERVED_COLUMNS`: these, and `__connect_…` for the runtime's
own); other names starting with `__` are value fields like any (Debezium's `__deleted`, `__op`):

| column          | Kafka record part | type                                        |
|-----------------|-------------------|---------------------------------------------|
| `__key`         | key               | any (a struct of the key fields, usually)   |
| `__headers`     | headers           | array of struct<key: string, value: string> |
| `__timestamp`   | timestamp         | timestamp (UTC)                             |
| `__tombstone`   | null value        | boolean (true: the value is null)           |
| `__topic`       | topic             | string                                      |
| `__partition`   | partition         | int (sinks only: set when the row is read)  |
| `__offset`      | offset            | long (sinks only)                           |

A transformation never sees one record at a time: it gives the columns of its output as
expressions over its input's columns, once for Spark (`spark`: Column expressions) and once for
Arrow (`arrow`: pyarrow arrays of one record batch), with the same meaning. The runtime applies it
to every row of the batch, or only where its predicate holds (merging the outputs column by
column), and chains transforms into one projection. A transform that drops records gives `keep`:
the runtime drops the others first, then projects the rows kept (a transform that only drops, as
Kafka's `Filter`, says so with `only_filters` and is not projected).

A transform that cannot handle a batch raises `DataError` (a record's data, not the config, is
wrong); what the runtime then does follows `errors.tolerance`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from connect_core.sdk.errors import DataError

if TYPE_CHECKING:  # the SDK imports without Spark or pyarrow
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

__all__ = [
    "HEADERS_COLUMN",
    "KEY_COLUMN",
    "MASKED_METADATA",
    "RECORD_COLUMNS",
    "RESERVED_COLUMNS",
    "TIMESTAMP_COLUMN",
    "TOMBSTONE_COLUMN",
    "DataError",
    "Predicate",
    "PredicateConfig",
    "TransformConfig",
    "Transformation",
    "column",
    "is_value_column",
]

KEY_COLUMN = "__key"
HEADERS_COLUMN = "__headers"
TIMESTAMP_COLUMN = "__timestamp"
TOMBSTONE_COLUMN = "__tombstone"
#: The record parts a row may carry besides its value (sources may set them; the runtime keeps them).
RECORD_COLUMNS = (KEY_COLUMN, HEADERS_COLUMN, TIMESTAMP_COLUMN, TOMBSTONE_COLUMN)
#: Every name that is not a value field: the record parts, the topic coordinates, and the columns
#: a topic's files keep for the runtime (`__run`, `__seq`: which run wrote a row, in what order).
RESERVED_COLUMNS = frozenset((*RECORD_COLUMNS, "__topic", "__partition", "__offset", "__run", "__seq"))
_RUNTIME_PREFIX = "__connect_"  # the runtime's working columns (staging, errant records)
#: Field metadata saying how a column's values were hidden before the topic (`hash SHA-256`,
#: `mask 4 chars`, `truncate 20 chars`): written with the topic's schema, reported by lineage.
MASKED_METADATA = "connect.masked"


def column(name: str) -> Column:
    """The Spark column `name`, whatever characters it has (`F.col("a.b")` would mean field b of a)."""
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def is_value_column(name: str) -> bool:
    """Whether the column `name` is part of a record's value (and not a record part the runtime keeps)."""
    return name not in RESERVED_COLUMNS and not name.startswith(_RUNTIME_PREFIX)


class TransformConfig(BaseModel):
    """The options of a transformation (`transforms.<alias>.<option>`), keyed as in Kafka."""

    # Unknown options are ignored, as Kafka ignores them: a config written for a newer Kafka still runs.
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)


class PredicateConfig(TransformConfig):
    """The options of a predicate (`predicates.<alias>.<option>`)."""


C = TypeVar("C", bound=TransformConfig)


class Transformation(ABC, Generic[C]):
    """One Single Message Transform: a column projection of the batch (or a row filter)."""

    config_model: ClassVar[type[TransformConfig]] = TransformConfig
    version: ClassVar[str] = "1.0"
    #: True when the transform may change a record's `__topic` (routers): the runtime then groups
    #: its output by topic again.
    routes: ClassVar[bool] = False
    #: What `GET /connector-plugins` says the transform does.
    doc: ClassVar[str] = ""
    #: True for a transform that is a query over the whole batch rather than a projection (the SQL
    #: transform): it implements `spark_frame` instead of `spark`/`arrow`, runs on Spark only (a
    #: batch read as Arrow goes through Spark instead) and takes no predicate.
    whole_batch: ClassVar[bool] = False
    #: True for a transform that only drops records (`keep`): the runtime then skips its projection.
    only_filters: ClassVar[bool] = False

    def __init__(self, config: C) -> None:
        self.config = config

    def spark_frame(self, df: DataFrame) -> DataFrame:
        """The output of a `whole_batch` transform."""
        raise NotImplementedError(f"{describe(self)} is a projection: the runtime calls `spark`")

    @abstractmethod
    def spark(self, df: DataFrame) -> dict[str, Column]:
        """The output's columns, in order, as expressions over `df`'s columns (one output row per input row)."""

    @abstractmethod
    def arrow(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        """The same columns computed over one Arrow record batch."""

    def column_notes(self) -> dict[str, str]:
        """Fields whose values the transform hides, and how (`{"email": "HMAC-SHA256, hex"}`; a key's
        fields as `__key.<field>`), for lineage's column-level notes. Never a key or a salt: lineage
        events leave the platform."""
        return {}

    def route_topic(self, topic: str) -> str | None:
        """For a router: the topic a record of `topic` goes to, when that depends on the topic name
        alone (RegexRouter); None when it depends on the record (TimestampRouter). The runtime
        uses it to know, without data, which topics a source writes (its DAG's Asset outlets)."""
        return None

    def spark_keep(self, df: DataFrame) -> Column | None:
        """Rows to keep, for transforms that drop records; None keeps every row (the default)."""
        return None

    def arrow_keep(self, batch: pa.RecordBatch) -> pa.Array | None:
        """The same as `spark_keep`, as a boolean array over one record batch."""
        return None


class Predicate(ABC, Generic[C]):
    """A condition on records (Kafka's `Predicate`), deciding where a transform applies."""

    config_model: ClassVar[type[TransformConfig]] = PredicateConfig
    version: ClassVar[str] = "1.0"
    doc: ClassVar[str] = ""

    def __init__(self, config: C) -> None:
        self.config = config

    @abstractmethod
    def spark(self, df: DataFrame) -> Column:
        """True for the rows the predicate holds for (never null)."""

    @abstractmethod
    def arrow(self, batch: pa.RecordBatch) -> pa.Array:
        """The same over one Arrow record batch: a boolean array without nulls."""


def describe(obj: Any) -> str:
    """`module.Class` of a transform or predicate, as error contexts name it."""
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"
