"""The SQL transform's query, checked without Spark: parsed by sqlglot (Spark's dialect) and walked.

Every node of the syntax tree must be of a kind on an allow-list (a query's clauses, names,
literals, operators, casts, CASE, windows, lambdas); every function call must name a function on
the allow-list of `_sqlfunctions`, unqualified; every table must be `__THIS__` or a CTE the query
defined before it. Anything else is refused, with the part that was: one statement that is no
query (INSERT, INSERT OVERWRITE DIRECTORY, CREATE, SET, ADD JAR, EXPLAIN, …), several statements,
a table of the catalog or a file by its path (``parquet.`/p` ``), `IDENTIFIER(…)`, a script
(`TRANSFORM … USING 'cmd'`), a parameter marker. Hints (`/*+ … */`) are refused, and so are
characters outside ASCII but in strings and quoted names: both are where two parsers (sqlglot's
and Spark's) could read the same text differently. What sqlglot cannot parse is refused too.

The check is what stands between the text and Spark on Spark Connect (no JVM on the client), so
it runs at create and again before every run (a config may have been stored before it existed).
"""

from __future__ import annotations

import re
from typing import Any

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from connect_core.transforms._sqlfunctions import ALLOWED_FUNCTIONS, REFUSED_FUNCTIONS

__all__ = ["BATCH", "RefusedQuery", "check_query"]

#: The name a query gives the batch.
BATCH = "__THIS__"
#: Where the parser records the name a function was called by, as written.
_CALLED = "connect_called_as"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_LINE_CONTINUATION = re.compile(r"\\\r?[\n\r]")

#: Node kinds a query is made of (functions aside): exact classes, no subclasses.
_NODES: frozenset[type[exp.Expr]] = frozenset(
    {
        # the query and its clauses
        exp.Select, exp.From, exp.Where, exp.Join, exp.With, exp.CTE, exp.TableAlias, exp.Union,
        exp.Intersect, exp.Except, exp.Subquery, exp.Group, exp.Having, exp.Order, exp.Ordered,
        exp.Limit, exp.Offset, exp.Distinct, exp.Lateral, exp.Values, exp.Pivot, exp.TableSample,
        exp.Cluster, exp.Distribute, exp.Sort, exp.Rollup, exp.Cube, exp.GroupingSets, exp.Qualify,
        exp.Window, exp.WindowSpec, exp.Filter, exp.IgnoreNulls, exp.RespectNulls, exp.WithinGroup,
        exp.Table,
        # names and values
        exp.Alias, exp.Aliases, exp.Column, exp.Identifier, exp.Star, exp.Literal, exp.Null,
        exp.Boolean, exp.HexString, exp.RawString, exp.Tuple, exp.Paren, exp.DataType,
        exp.DataTypeParam, exp.Interval, exp.IntervalSpan, exp.Var, exp.Bracket, exp.Dot,
        exp.PropertyEQ, exp.Kwarg, exp.Lambda, exp.ColumnDef, exp.Slice, exp.JSONPath,
        # operators and predicates
        exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.Neg, exp.Not, exp.And, exp.Or,
        exp.Xor, exp.EQ, exp.NEQ, exp.NullSafeEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Is, exp.In,
        exp.Between, exp.Like, exp.ILike, exp.Escape, exp.BitwiseAnd, exp.BitwiseOr, exp.BitwiseXor,
        exp.BitwiseNot, exp.BitwiseLeftShift, exp.BitwiseRightShift, exp.DPipe, exp.Exists,
        exp.Any, exp.All, exp.Collate,
    }
)  # fmt: skip

#: Functions that syntax makes, not a call by name (`a RLIKE b`, `'a' 'b'`, `DATE '…'`, `a::int`).
_SYNTAX_FUNCTIONS: frozenset[type[exp.Expr]] = frozenset(
    {
        exp.Cast,
        exp.TryCast,
        exp.Concat,
        exp.RegexpLike,
        exp.Case,
        exp.If,
        exp.Extract,
        exp.Array,
        exp.Struct,
        exp.VarMap,
        exp.Map,
    }
)

#: What some refused kinds are, for the message.
_KINDS: dict[type[exp.Expr], str] = {
    exp.QueryTransform: "a script transform (`TRANSFORM … USING`) runs a command",
    exp.Placeholder: "a parameter marker has no value here",
    exp.Parameter: "a parameter has no value here",
    exp.Hint: "a hint",
}


#: What the parser wraps a call in.
_CALL_WRAPPERS = (exp.Window, exp.IgnoreNulls, exp.RespectNulls, exp.Filter, exp.WithinGroup)
#: Names Spark parses as syntax, not as a call of its function registry.
_SYNTAX_CALLS = frozenset({"try_cast"})


class RefusedQuery(ValueError):
    """The query is not a pure query over the batch; the message says which part is refused."""


class _Parser(Spark.Parser):  # type: ignore[misc,valid-type]
    def _parse_function_call(self, *args: Any, **kwargs: Any) -> exp.Expr | None:
        # sqlglot maps a call to a node class (`percentile_approx(…)` to ApproxQuantile); Spark
        # resolves the call by the name written, so that name is what is checked
        called = self._curr
        found = super()._parse_function_call(*args, **kwargs)
        node = found
        while isinstance(node, _CALL_WRAPPERS):  # `f(…) IGNORE NULLS`, `… FILTER (…)`, `… OVER (…)`
            node = node.this
        if isinstance(node, exp.Func) and called is not None:
            node.meta.setdefault(_CALLED, called.text)
        return found


class _Dialect(Spark):
    parser_class = _Parser


_DIALECT = _Dialect()


def check_query(query: str) -> str:
    """The query as Spark is to run it: the text sqlglot generates from the tree it parsed and checked,
    never the user's own text, so a part the two parsers read differently (where a comment ends,
    how a string escapes) is not run unseen. `RefusedQuery` unless `query` is one query over
    `__THIS__` using allowed parts only."""
    text = _checked_text(query)
    # The generated text is input too: sqlglot writes some quoted names raw (a LATERAL VIEW alias, an
    # EXTRACT unit), so a name holding `--` or a line break could turn into a comment or a second
    # query there. It must read back, through the same checks, as the very tree that was checked.
    try:
        again = _checked_text(text)
    except RefusedQuery as exc:
        raise RefusedQuery(f"is refused: a quoted name in it reads differently once written out ({exc})") from None
    if again != text:
        raise RefusedQuery(
            "is refused: it does not read back as the query that was checked (a quoted name that is no name?)"
        )
    return text


def _checked_text(query: str) -> str:
    if _LINE_CONTINUATION.search(query):
        # Spark's `--` comment runs on past a backslash at the line's end; sqlglot's ends there
        raise RefusedQuery("is refused: a backslash at the end of a line (where a comment ends is read two ways)")
    try:
        tokens = _DIALECT.tokenize(query)
        _check_tokens(tokens)
        statements = [s for s in _DIALECT.parser().parse(tokens, query) if s is not None]
    except (ParseError, TokenError) as exc:
        raise RefusedQuery(f"cannot be parsed: {_parse_message(exc)}") from exc
    if len(statements) != 1:
        raise RefusedQuery(f"must be one query, not {len(statements)} statements")
    root = statements[0]
    if not isinstance(root, exp.Query):
        raise RefusedQuery(f"is refused: `{_excerpt(root)}` is not a query (SELECT or WITH)")
    reads_batch = False
    for node in root.walk():
        _check_node(node)
        if isinstance(node, exp.Table) and _check_table(node):
            reads_batch = True
    if not reads_batch:
        raise RefusedQuery(f"must read the batch as `{BATCH}` (e.g. `SELECT * FROM {BATCH}`)")
    text = str(root.sql(dialect=_DIALECT, comments=False))
    if "${" in text:
        # Spark substitutes `${env:X}`/`${system:X}` into the text before parsing (strings and quoted
        # names too), unless `spark.sql.variable.substitute` is off, as the runtime sets it: twice
        # guarded, as a `\u0024{` in a string is `${` once written out again
        raise RefusedQuery("is refused: `${` (Spark would fill in a variable before parsing the query)")
    return text


def _check_tokens(tokens: list[Token]) -> None:
    for token in tokens:
        if token.token_type == TokenType.HINT or any(c.lstrip().startswith("+") for c in token.comments):
            raise RefusedQuery("is refused: hints (`/*+ … */`) are not allowed")
        if token.comments:
            # where a comment ends is where two parsers part ways: a query over a batch needs none
            raise RefusedQuery("is refused: comments (`--`, `/* … */`) are not allowed in the query")
        quoted = token.token_type in (TokenType.STRING, TokenType.IDENTIFIER, TokenType.RAW_STRING)
        if not quoted and not token.text.isascii():
            raise RefusedQuery(f"is refused: `{token.text}` has characters outside ASCII (quote the name in backticks)")


def _check_node(node: exp.Expr) -> None:
    called = node.meta.get(_CALLED)
    if isinstance(node, exp.Func) and called is not None:
        _check_call(str(called))
    elif isinstance(node, exp.Anonymous):
        _check_call(node.name)
    elif type(node) not in _NODES | _SYNTAX_FUNCTIONS and not isinstance(node, exp.JSONPathPart):
        what = _KINDS.get(type(node), "is not allowed in a query over the batch")
        raise RefusedQuery(f"is refused: `{_excerpt(node)}`: {what}")
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Func):
        raise RefusedQuery(f"is refused: `{_excerpt(node)}` calls a function of a catalog, not a built-in one")


def _check_call(called: str) -> None:
    name = called.lower()
    if not _NAME.match(called):
        raise RefusedQuery(f"is refused: `{called}` is not a function name")
    if name in ALLOWED_FUNCTIONS or name in _SYNTAX_CALLS:
        return
    if name == "identifier":
        raise RefusedQuery("is refused: `IDENTIFIER(…)` builds a name from a string")
    reason = REFUSED_FUNCTIONS.get(name)
    why = f" ({reason})" if reason else ""
    raise RefusedQuery(f"is refused: `{called}`{why} is not an allowed function")


def _check_table(table: exp.Table) -> bool:
    """Whether `table` is the batch; raises unless it is the batch, a visible CTE or a function."""
    if isinstance(table.this, exp.Func):  # a generator over values (`FROM explode(…)`), checked as a call
        return False
    if not isinstance(table.this, exp.Identifier) or table.args.get("db") or table.args.get("catalog"):
        raise RefusedQuery(f"is refused: `{_excerpt(table)}` is not `{BATCH}` (files and tables are not readable)")
    name = table.this.this
    if name == BATCH:
        return True
    if name not in _visible_ctes(table):
        raise RefusedQuery(f"is refused: `{name}` is neither `{BATCH}` nor a CTE the query defines before it")
    return False


def _visible_ctes(node: exp.Expr) -> set[str]:
    """The CTE names a table reference at `node` resolves to: those of every enclosing WITH, within
    a CTE's own definition only those defined before it (a CTE that is not recursive)."""
    names: set[str] = set()
    while node.parent is not None:
        parent = node.parent
        if isinstance(node, exp.CTE) and isinstance(parent, exp.With):
            earlier = parent.expressions[: parent.expressions.index(node)]
            names |= {cte.alias for cte in earlier}
        elif (
            isinstance(parent, exp.Query) and parent.args.get("with_") is not None and node is not parent.args["with_"]
        ):
            names |= {cte.alias for cte in parent.args["with_"].expressions}
        node = parent
    return names


def _excerpt(node: exp.Expr) -> str:
    text = node.sql(dialect="spark")
    return text if len(text) <= 80 else text[:77] + "…"


def _parse_message(exc: ParseError | TokenError) -> str:
    errors = getattr(exc, "errors", None)
    if errors:
        first = errors[0]
        return f"{first.get('description')} (line {first.get('line')}, column {first.get('col')})"
    return str(exc).splitlines()[0]
