"""The SQL transform's query, checked where it runs on a classic session: its analysed plan, walked
as a tree through py4j before anything runs.

Every plan node and every expression (subquery plans included) is taken by its JVM class and must be
on an allow-list: the query-shaped nodes (Project, Filter, Aggregate, Join, Window, CTEs, …), the
structural expressions (attributes, literals, operators, casts, lambdas, subqueries, …) and the
classes Spark's function registry names for the allowed SQL functions (`_sqlfunctions`). The batch
itself (the temporary view the query reads as `__THIS__`) is not entered: it is the connector's
own plan, not the query's. A refused class is named in the `ConfigError`.
"""

from __future__ import annotations

from typing import Any

from connect_core.sdk.errors import ConfigError
from connect_core.transforms._sqlfunctions import ALLOWED_FUNCTIONS

__all__ = ["check_analysed_plan"]

#: Plan nodes a query over the batch is made of (`View` only as the batch, see `_walk`).
_NODE_NAMES = """
    Project Filter Aggregate Join SubqueryAlias Union Intersect Except Distinct Deduplicate Window
    Sort GlobalLimit LocalLimit Offset Tail Expand Generate WithCTE CTERelationDef CTERelationRef
    LocalRelation OneRowRelation Sample Repartition RepartitionByExpression RebalancePartitions
    ResolvedHint LateralJoin WindowGroupLimit
"""
_NODES = frozenset(_NODE_NAMES.split())

#: Expressions that are syntax, not a function called by name.
_STRUCTURAL_NAMES = """
    AttributeReference OuterReference Alias Literal Cast Upcast CaseWhen If In InSet InSubquery
    ListQuery Exists ScalarSubquery LateralSubquery NamedLambdaVariable UnresolvedNamedLambdaVariable
    LambdaFunction WindowExpression WindowSpecDefinition SpecifiedWindowFrame UnspecifiedFrame
    RowFrame$ RangeFrame$ UnboundedPreceding$ UnboundedFollowing$ CurrentRow$ UnspecifiedFrame$ SortOrder
    AggregateExpression GetStructField GetArrayItem GetMapValue GetArrayStructFields ExtractValue
    CreateNamedStruct CreateArray CreateMap And Or Not EqualTo EqualNullSafe LessThan LessThanOrEqual
    GreaterThan GreaterThanOrEqual IsNull IsNotNull Add Subtract Multiply Divide Remainder
    IntegralDivide UnaryMinus UnaryPositive BitwiseAnd BitwiseOr BitwiseXor BitwiseNot Like ILike
    RLike Concat Coalesce Grouping GroupingID VirtualColumn Explode PosExplode Inline Stack
    MultiAlias PrettyAttribute KnownNotNull KnownFloatingPointNormalized TryEval
    Ceil RoundCeil Floor RoundFloor Collate Contains CountMinSketchAgg CurrentDate EndsWith Hour
    StringLPad StringRPad MakeTimestampFromDateTime MakeTimestampNTZ TryMakeTimestampFromDateTime Mask
    MaxBy MinBy MaxMinByK Minute Mode ParseJson PercentileCont PercentileDisc RaiseError Second
    StartsWith TimeBucket ToCharacter ParseToTimestamp ParseToDate Average Sum VariantGet DatePart
    Extract TupleSketchAggDouble TupleSketchAggInteger TupleUnionAggDouble TupleUnionAggInteger
    TupleUnionDouble TupleUnionInteger TupleUnionThetaDouble TupleUnionThetaInteger
"""  # the second part: what the registry's expression builders (`ceil`, `lpad`, …) build
_STRUCTURAL = frozenset(_STRUCTURAL_NAMES.split())


def check_analysed_plan(spark: Any, plan: Any, batch_view: str) -> None:
    """Raise `ConfigError` naming the first class of `plan` (a JVM LogicalPlan) not allowed.
    `batch_view` is the temporary view that is the batch: its plan is not the query's."""
    allowed = _STRUCTURAL | _registry_classes(spark)
    stack = [plan]
    while stack:
        node = stack.pop()
        name = str(node.getClass().getSimpleName())
        if name == "View" and _is_view(node, batch_view):
            continue
        if name not in _NODES:
            _refuse(name, "plan node")
        expressions = node.expressions().iterator()
        while expressions.hasNext():
            _check_expression(expressions.next(), allowed)
        stack.extend(_scala_list(node.subqueries()))
        stack.extend(_scala_list(node.children()))


def _check_expression(expression: Any, allowed: frozenset[str]) -> None:
    stack = [expression]
    while stack:
        node = stack.pop()
        name = str(node.getClass().getSimpleName())
        if name not in allowed:
            _refuse(name, "expression")
        stack.extend(_scala_list(node.children()))


def _registry_classes(spark: Any) -> frozenset[str]:
    """The simple class names Spark's built-in function registry gives for the allowed functions
    (the built-in registry only: a session's own functions, UDFs, are never allowed)."""
    version = str(spark.version)
    if version not in _BUILTIN_CLASSES:  # a py4j walk of the registry takes most of a second
        _BUILTIN_CLASSES[version] = _builtin_classes(spark._jvm)
    return _BUILTIN_CLASSES[version]


#: The allowed classes by Spark version: the built-in registry is fixed for a release.
_BUILTIN_CLASSES: dict[str, frozenset[str]] = {}


def _builtin_classes(jvm: Any) -> frozenset[str]:
    registry = jvm.org.apache.spark.sql.catalyst.analysis.FunctionRegistry.builtin()
    names = set()
    for identifier in _scala_list(registry.listFunction()):
        info = registry.lookupFunction(identifier)
        if str(identifier.funcName()) in ALLOWED_FUNCTIONS and info.isDefined() and info.get().getClassName():
            names.add(str(info.get().getClassName()).rsplit(".", 1)[-1])
    return frozenset(names)


def _is_view(node: Any, batch_view: str) -> bool:
    return bool(node.isTempView()) and str(node.desc().identifier().table()) == batch_view


def _scala_list(seq: Any) -> list[Any]:
    out = []
    iterator = seq.iterator()
    while iterator.hasNext():
        out.append(iterator.next())
    return out


def _refuse(name: str, kind: str) -> None:
    raise ConfigError(
        f"the SQL transform's query is refused where it runs: `{name}` is not an allowed {kind} "
        "(commands, writes, files, Java calls and UDFs are refused)",
        {"query": [f"`{name}` is not an allowed {kind}"]},
    )
