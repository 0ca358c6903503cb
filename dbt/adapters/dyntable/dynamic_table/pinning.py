"""A model's query as of chosen source versions: the FULL refresh query and the semantics check.

Views are expanded into their definitions first (:mod:`~dbt.adapters.dyntable.differentiation.views`),
so every Delta table beneath them is pinned too; reading a view would read its tables at their
latest versions and break snapshot isolation.

>>> pin_query("select a from v", {"s.t": 3}, views={"s.v": "select a from s.t"}, default_schema="s")
'SELECT a FROM (SELECT a FROM s.t VERSION AS OF 3) AS v'
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Callable, Dict, Mapping, Optional, Set

from sqlglot import exp

from dbt.adapters.dyntable.differentiation.views import base_tables, expand_views, table_references
from dbt.adapters.dyntable.dynamic_table.clock import at_data_timestamp
from dbt.adapters.dyntable.dynamic_table.model import refresh_boundaries
from dbt.adapters.dyntable.vocabulary import DIALECT, table_name

if TYPE_CHECKING:
    from dbt.adapters.dyntable.engines.base import Engine


def read_views(engine: "Engine", sql: str, default_schema: str) -> Dict[str, str]:
    """Definitions of every view ``sql`` reads, transitively, keyed ``schema.view``."""
    views: Dict[str, str] = {}
    seen: Set[str] = set()
    pending = [(sql, default_schema)]
    while pending:
        text, schema = pending.pop()
        for name in base_tables(text, {}, schema) - seen:
            seen.add(name)
            view_schema, view_name = name.split(".", 1)
            definition = engine.view_definition(view_schema, view_name)
            if definition is not None:
                views[name] = definition
                pending.append((definition, view_schema))
    return views


def boundary_tables(sql: str, views: Mapping[str, str], schema: str) -> Set[str]:
    """The Delta tables read across a refresh boundary: each marked table, and every table
    beneath a marked view."""
    tables: Set[str] = set()
    for name in refresh_boundaries(sql):
        tables |= base_tables(f"select * from {name}", views, schema)
    return tables


def pin_query(
    sql: str,
    versions: Mapping[str, int],
    views: Mapping[str, str],
    default_schema: str,
    read_at: Optional[Callable[[str, int], Optional[str]]] = None,
    data_timestamp: Optional[datetime] = None,
) -> str:
    """``sql`` with views expanded and each table in ``versions`` read ``VERSION AS OF`` it, or
    from the relation ``read_at(table, version)`` names where the engine cannot time-travel;
    with a ``data_timestamp``, its clock functions read that instant (``clock.py``)."""
    tree = expand_views(sql, views, default_schema)
    if data_timestamp is not None:
        tree = at_data_timestamp(tree, data_timestamp)
    for table in list(table_references(tree)):
        name = table_name(table)
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
