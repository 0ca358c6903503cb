"""Views inlined into the query that reads them: the one view-expansion path.

Planning, the FULL refresh's pinned query and the semantics check all read a query with its views
replaced by their definitions (recursively, each view's own tables qualified with the view's
schema), so changes are tracked on the Delta tables beneath the views and every one of them can be
pinned to a version. After expansion every base table is schema-qualified, and a table without a
schema is a CTE.

>>> print(expand_views("select a from v", {"s.v": "select a from t"}, "s").sql("spark"))
SELECT a FROM (SELECT a FROM s.t) AS v
>>> sorted(base_tables("select * from s.a join b on a.x = b.x", {}, "s"))
['s.a', 's.b']
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterator, Mapping, Optional, Set, Tuple

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from dbt.adapters.dyntable.differentiation.errors import NotIncrementalizable
from dbt.adapters.dyntable.vocabulary import DIALECT, table_name


class ViewCycle(NotIncrementalizable):
    """Views that read each other in a cycle: no query can be formed from them."""

    def __init__(self, chain: Tuple[str, ...]) -> None:
        super().__init__("view", " -> ".join(chain), "views reference each other in a cycle")


def parse_query(sql: str) -> exp.Expression:
    """``sql`` as one parsed statement, or :class:`NotIncrementalizable` saying where it fails."""
    try:
        statements = [s for s in sqlglot.parse(sql, read=DIALECT) if s is not None]
    except ParseError as error:
        raise NotIncrementalizable("parse", sql[:200], syntax_error(error)) from error
    if len(statements) != 1 or not isinstance(statements[0], exp.Expression):
        raise NotIncrementalizable("parse", sql[:200], "expected exactly one query")
    return statements[0]


#: sqlglot's words for an incomplete clause ("Required keyword: 'this' missing for <class
#: '...Where'>"), to be told as what the user wrote.
_MISSING_PART = re.compile(r"Required keyword: '(\w+)' missing for <class '(?:[\w.]+\.)?(\w+)'>")


def syntax_error(error: ParseError) -> str:
    """Where the SQL does not parse and why, in the user's terms.

    >>> try:
    ...     sqlglot.parse("select a from t where", read=DIALECT)
    ... except ParseError as error:
    ...     print(syntax_error(error))
    syntax error at line 1, column 21, at 'where': the WHERE clause is incomplete
    """
    found = error.errors[0] if error.errors else {}
    description = str(found.get("description") or error).splitlines()[0]
    missing = _MISSING_PART.match(description)
    if missing:
        description = f"the {missing.group(2).upper()} clause is incomplete"
    where = f"line {found.get('line')}, column {found.get('col')}" if found.get("line") else "somewhere"
    near = f", at '{found['highlight']}'" if found.get("highlight") else ""
    return f"syntax error at {where}{near}: {description}"


def expand_views(sql: str, views: Mapping[str, str], default_schema: Optional[str]) -> exp.Expression:
    """Parse ``sql`` and replace every view it reads (``views``: ``schema.view`` -> its SELECT)
    by its definition, as a subquery; qualify every base table with its schema (bare names stay
    bare without a ``default_schema``)."""
    normalized = {table_name(name): definition for name, definition in views.items()}
    return _expand(parse_query(sql), normalized, default_schema, ())


def _expand(
    tree: exp.Expression, views: Mapping[str, str], schema: Optional[str], expanding: Tuple[str, ...]
) -> exp.Expression:
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    for table in list(tree.find_all(exp.Table)):
        if not table.name or (not table.db and table.name.lower() in ctes):
            continue
        name = table_name(table, schema)
        definition = views.get(name)
        if definition is None:
            if not table.db and schema:
                table.set("db", exp.to_identifier(schema))
            continue
        if name in expanding:
            raise ViewCycle(expanding + (name,))
        body = _expand(parse_query(definition), views, name.split(".", 1)[0], expanding + (name,))
        alias = table.alias or table.name
        table.replace(exp.Subquery(this=body, alias=exp.TableAlias(this=exp.to_identifier(alias))))
    return tree


def table_references(tree: exp.Expression) -> Iterator[exp.Table]:
    """The base-table references of an expanded query (CTE references left out)."""
    return (t for t in tree.find_all(exp.Table) if t.name and t.db)


def base_tables(sql: str, views: Mapping[str, str], default_schema: str) -> Set[str]:
    """The Delta tables a query reads once views are expanded, as canonical names."""
    return {table_name(t) for t in table_references(expanded_query(sql, views, default_schema))}


def expanded_query(sql: str, views: Mapping[str, str], default_schema: str) -> exp.Expression:
    """:func:`expand_views`, memoized: one tree per query, shared, that callers only read."""
    return _expanded(sql, tuple(sorted(views.items())), default_schema)


@lru_cache(maxsize=1024)
def _expanded(sql: str, views: Tuple[Tuple[str, str], ...], default_schema: str) -> exp.Expression:
    # Every refresh of a DT, NO_DATA ones included, asks the tables and the clock of the same few
    # queries, and parsing is most of what answering costs.
    return expand_views(sql, dict(views), default_schema)
