"""An incremental snapshot's `additional-conditions` filter (Debezium 2.x), checked and rewritten.

The filter is SQL text from whoever may send a signal (`POST /connectors/{name}/signals`, or a row
of the signal table), and it is run inside the source's chunk queries: it must never be anything
but a predicate over the table's own row. So it is parsed by sqlglot (PostgreSQL's dialect) and
walked: every node must be of an exact kind on a short allow-list (the table's columns by name,
plain literals, comparisons, AND/OR/NOT, parentheses, IN over a list, BETWEEN, IS [NOT] NULL,
LIKE/ILIKE, casts to plain types). Anything else is refused naming the part: a function (`pg_sleep`),
a subquery, a second statement, a comment, a system column (`ctid`), a column of another table, a
parameter, an odd string form (`E'…'`, `$$…$$`) or a backslash in a string (read two ways
depending on `standard_conforming_strings`).

What runs is the text sqlglot writes back from the checked tree (columns as quoted names), never
the sender's text; it must read back as the same text, so a quoted name cannot turn into syntax
once written out. The same check runs where the signal is queued and again where a run acts on it.
"""

from __future__ import annotations

from collections.abc import Collection

from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from connect_core.sdk.signals import MAX_FILTER

__all__ = ["MAX_FILTER", "RefusedFilter", "checked_filter"]

#: How deeply a filter may nest (a predicate needs few levels; the parser recurses per level).
_MAX_DEPTH = 40

#: What a filter is made of: exact classes, no subclasses.
_NODES: frozenset[type[exp.Expr]] = frozenset(
    {
        exp.Column, exp.Identifier, exp.Literal, exp.Null, exp.Boolean, exp.Paren, exp.Neg,
        exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.And, exp.Or, exp.Not,
        exp.In, exp.Between, exp.Is, exp.Like, exp.ILike, exp.Cast, exp.DataType, exp.DataTypeParam,
    }
)  # fmt: skip

#: What the whole filter may be: a predicate (a bare column or literal is none).
_PREDICATES: frozenset[type[exp.Expr]] = frozenset(
    {exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.And, exp.Or, exp.Not, exp.In, exp.Between, exp.Is,
     exp.Like, exp.ILike}
)  # fmt: skip

#: The types a literal may be cast to: their input functions only parse text.
_CAST_TYPES = frozenset(
    {
        exp.DataType.Type.SMALLINT, exp.DataType.Type.INT, exp.DataType.Type.BIGINT, exp.DataType.Type.DECIMAL,
        exp.DataType.Type.FLOAT, exp.DataType.Type.DOUBLE, exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR,
        exp.DataType.Type.CHAR, exp.DataType.Type.BOOLEAN, exp.DataType.Type.DATE, exp.DataType.Type.TIME,
        exp.DataType.Type.TIMETZ, exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPTZ,
        exp.DataType.Type.UUID,
    }
)  # fmt: skip

#: PostgreSQL's system columns: every table has them, none is a row's value.
_SYSTEM_COLUMNS = frozenset({"ctid", "xmin", "xmax", "cmin", "cmax", "tableoid", "oid"})

#: Token kinds a filter may hold (anything else, e.g. `;`, `$1`, `E'…'`, is refused at once).
_TOKENS = frozenset(
    {
        TokenType.VAR, TokenType.IDENTIFIER, TokenType.STRING, TokenType.NUMBER, TokenType.NULL,
        TokenType.TRUE, TokenType.FALSE, TokenType.L_PAREN, TokenType.R_PAREN, TokenType.COMMA,
        TokenType.EQ, TokenType.NEQ, TokenType.GT, TokenType.GTE, TokenType.LT, TokenType.LTE,
        TokenType.AND, TokenType.OR, TokenType.NOT, TokenType.IN, TokenType.BETWEEN, TokenType.IS,
        TokenType.LIKE, TokenType.ILIKE, TokenType.DASH, TokenType.PLUS, TokenType.DCOLON, TokenType.DOT,
        # the names of the types a cast may go to (checked again on the tree)
        TokenType.SMALLINT, TokenType.INT, TokenType.BIGINT, TokenType.DECIMAL, TokenType.FLOAT, TokenType.DOUBLE,
        TokenType.TEXT, TokenType.VARCHAR, TokenType.CHAR, TokenType.BOOLEAN, TokenType.DATE, TokenType.TIME,
        TokenType.TIMETZ, TokenType.TIMESTAMP, TokenType.TIMESTAMPTZ, TokenType.UUID, TokenType.ALIAS,
    }
)  # fmt: skip

_DIALECT = Postgres()


class RefusedFilter(ValueError):
    """The filter is not a plain predicate over the table's columns; the message says which part."""


def checked_filter(text: str, columns: Collection[str], masked: Collection[str] = ()) -> str:
    """`text` as the chunk queries run it: the SQL sqlglot writes for PostgreSQL from the checked
    tree. RefusedFilter unless it is one predicate over `columns` (the table's) of allowed parts."""
    if not isinstance(text, str) or not text.strip():
        raise RefusedFilter("is empty: give a condition over the table's columns (`qty > 10`)")
    if len(text) > MAX_FILTER:
        raise RefusedFilter(f"is {len(text)} characters long: at most {MAX_FILTER}")
    rendered = _rendered(text, columns, masked)
    if _rendered(rendered, columns, masked) != rendered:  # what runs must read back as what was checked
        raise RefusedFilter("does not read back as the condition that was checked (a quoted name that is no name?)")
    return rendered


def _rendered(text: str, columns: Collection[str], masked: Collection[str]) -> str:
    try:
        tokens = _DIALECT.tokenize(text)
        for token in tokens:
            if token.comments:
                raise RefusedFilter("holds a comment (`--`, `/* … */`): not allowed")
            if token.token_type not in _TOKENS:
                shown = token.text if "STRING" not in token.token_type.name else token.token_type.name.lower()
                raise RefusedFilter(f"is refused at `{_short(shown)}`: {_token_reason(token.token_type)}")
            if token.token_type == TokenType.STRING and ("\\" in token.text or not token.text.isprintable()):
                raise RefusedFilter("has a backslash or a control character in a string: not allowed")
            if token.token_type == TokenType.VAR and not token.text.isascii():
                raise RefusedFilter(f'`{_short(token.text)}`: a name outside ASCII must be quoted ("…")')
        statements = [s for s in _DIALECT.parser().parse(tokens, text) if s is not None]
    except (ParseError, TokenError) as exc:
        raise RefusedFilter(f"cannot be parsed: {str(exc).splitlines()[0]}") from exc
    except RecursionError:
        raise RefusedFilter(f"nests too deeply (at most {_MAX_DEPTH} levels)") from None
    if len(statements) != 1:
        raise RefusedFilter(f"must be one condition, not {len(statements)} statements")
    (root,) = statements
    if _depth(root) > _MAX_DEPTH:
        raise RefusedFilter(f"nests too deeply (at most {_MAX_DEPTH} levels)")
    inner = root.unnest() if isinstance(root, exp.Paren) else root
    if type(inner) not in _PREDICATES:
        raise RefusedFilter(f"`{_excerpt(root)}` is no condition (a comparison, IN, LIKE, IS NULL …)")
    for node in list(root.walk()):
        _check(node, columns, masked)
    return str(root.sql(dialect=_DIALECT, comments=False))


def _check(node: exp.Expr, columns: Collection[str], masked: Collection[str]) -> None:
    if type(node) not in _NODES:
        raise RefusedFilter(f"is refused at `{_excerpt(node)}`: {_node_reason(node)}")
    if isinstance(node, exp.Column):
        if node.table or node.args.get("db") or node.args.get("catalog"):
            raise RefusedFilter(f"`{_excerpt(node)}` names another table: use the column's name alone")
        ident = node.this
        if not isinstance(ident, exp.Identifier):
            raise RefusedFilter(f"`{_excerpt(node)}` is no column name")
        name = ident.this if ident.quoted else ident.this.lower()  # PostgreSQL folds unquoted names
        if name in _SYSTEM_COLUMNS:
            raise RefusedFilter(f"`{name}` is a system column: only the table's own columns may be compared")
        if name in masked:
            raise RefusedFilter(
                f"`{_short(name)}` is masked (`column.mask…`/`column.truncate…`): a filter on it would tell its values"
            )
        if name not in columns:
            raise RefusedFilter(f"`{_short(name)}` is not a column of the table")
        node.set("this", exp.to_identifier(name, quoted=True))
    elif isinstance(node, exp.In) and any(node.args.get(k) for k in ("query", "unnest", "field")):
        raise RefusedFilter(f"`{_excerpt(node)}`: IN takes a list of values only")
    elif isinstance(node, exp.Cast):
        kind = node.args.get("to")
        if not isinstance(kind, exp.DataType) or kind.this not in _CAST_TYPES or node.args.get("format"):
            raise RefusedFilter(f"`{_excerpt(node)}`: a cast to that type is not allowed")
    elif isinstance(node, exp.Literal) and node.is_string and "\\" in node.this:
        raise RefusedFilter("has a backslash in a string: not allowed")


def _token_reason(kind: TokenType) -> str:
    if kind == TokenType.SEMICOLON:
        return "one condition only (no `;`)"
    if kind in (TokenType.PARAMETER, TokenType.PLACEHOLDER, TokenType.COLON):
        return "parameters have no value here"
    if kind in (TokenType.SELECT, TokenType.WITH, TokenType.FROM):
        return "subqueries are not allowed"
    if "STRING" in kind.name:
        return "only plain 'strings' are allowed"
    return "not allowed in a filter (columns, literals, comparisons, AND/OR/NOT, IN, BETWEEN, IS NULL, LIKE)"


def _node_reason(node: exp.Expr) -> str:
    if isinstance(node, exp.Func):
        return "functions are not allowed"
    if isinstance(node, exp.Query | exp.Subquery):
        return "subqueries are not allowed"
    return "not allowed in a filter (columns, literals, comparisons, AND/OR/NOT, IN, BETWEEN, IS NULL, LIKE)"


def _depth(root: exp.Expr) -> int:
    deepest = 0
    for node in root.walk():
        deepest = max(deepest, node.depth)
    return deepest


def _excerpt(node: exp.Expr) -> str:
    return _short(node.sql(dialect=_DIALECT))


def _short(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "…"
