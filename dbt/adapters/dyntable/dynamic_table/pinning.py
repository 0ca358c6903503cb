"""A model's query as of chosen source versions: the FULL refresh query and the DVS oracle.

Views are expanded into their definitions first (recursively), so every Delta table beneath them
is pinned too; reading a view would read its tables at their latest versions and break snapshot
isolation.

>>> pin_query("select a from v", {"s.t": 3}, views={"s.v": "select a from s.t"}, default_schema="s")
'SELECT a FROM (SELECT a FROM s.t VERSION AS OF 3) AS v'
>>> sorted(base_tables("select * from s.a join b on a.x = b.x", {}, "s"))
['s.a', 's.b']
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable, FrozenSet, Mapping, Optional, Set, Tuple

import sqlglot
from sqlglot import exp

DIALECT = "spark"
MAX_VIEW_DEPTH = 32


def qualified(table: exp.Table, default_schema: str) -> str:
    return f"{(table.db or default_schema).lower()}.{table.name.lower()}"


def _cte_names(tree: exp.Expression) -> Set[str]:
    return {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}


def expand_views(sql: str, views: Mapping[str, str], default_schema: str) -> exp.Expression:
    """Parse ``sql`` and replace every view it reads by its definition, as a subquery."""
    tree = sqlglot.parse_one(sql, read=DIALECT)
    for _ in range(MAX_VIEW_DEPTH):
        ctes = _cte_names(tree)
        replaced = False
        for table in list(tree.find_all(exp.Table)):
            if not table.db and table.name.lower() in ctes:
                continue
            definition = views.get(qualified(table, default_schema))
            if definition is None:
                continue
            view_schema = table.db or default_schema
            body = expand_views(definition, {}, view_schema)  # qualify the view's own tables
            _qualify_tables(body, view_schema)
            alias = table.alias or table.name
            table.replace(exp.Subquery(this=body, alias=exp.TableAlias(this=exp.to_identifier(alias))))
            replaced = True
        if not replaced:
            return tree
    raise ValueError(f"views nest deeper than {MAX_VIEW_DEPTH} levels (a cycle?)")


def _qualify_tables(tree: exp.Expression, schema: str) -> None:
    ctes = _cte_names(tree)
    for table in tree.find_all(exp.Table):
        if not table.db and table.name.lower() not in ctes:
            table.set("db", exp.to_identifier(schema))


def base_tables(sql: str, views: Mapping[str, str], default_schema: str) -> Set[str]:
    """The Delta tables a query reads once views are expanded, as lower-case ``schema.table``."""
    return set(_base_tables(sql, tuple(sorted(views.items())), default_schema))


@lru_cache(maxsize=1024)
def _base_tables(sql: str, views: Tuple[Tuple[str, str], ...], default_schema: str) -> FrozenSet[str]:
    # Memoized: every refresh of a DT, NO_DATA ones included, asks this of the same few queries,
    # and parsing is most of what it costs.
    tree = expand_views(sql, dict(views), default_schema)
    ctes = _cte_names(tree)
    return frozenset(
        qualified(t, default_schema)
        for t in tree.find_all(exp.Table)
        if t.name and not (not t.db and t.name.lower() in ctes)
    )


def pin_query(
    sql: str,
    versions: Mapping[str, int],
    views: Mapping[str, str],
    default_schema: str,
    read_at: Optional[Callable[[str, int], Optional[str]]] = None,
) -> str:
    """``sql`` with views expanded and each table in ``versions`` read ``VERSION AS OF`` it, or
    from the relation ``read_at(table, version)`` names where the engine cannot time-travel."""
    tree = expand_views(sql, views, default_schema)
    ctes = _cte_names(tree)
    for table in list(tree.find_all(exp.Table)):
        if not table.db and table.name.lower() in ctes:
            continue
        name = qualified(table, default_schema)
        version = versions.get(name)
        if version is None:
            continue
        replacement = read_at(name, version) if read_at else None
        if replacement is not None:
            alias = exp.TableAlias(this=exp.to_identifier(table.alias or table.name))
            table.replace(exp.Table(this=exp.to_identifier(replacement), alias=alias))
        else:
            table.set(
                "version",
                exp.Version(this="VERSION", kind="AS OF", expression=exp.Literal.number(version)),
            )
    return tree.sql(dialect=DIALECT)
