"""A SELECT: its FROM and WHERE, aggregation, windows, select list and DISTINCT."""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Tuple, cast

from sqlglot import exp

from dbt.adapters.dyntable.differentiation.errors import NotIncrementalizable
from dbt.adapters.dyntable.differentiation.lowering.aggregates import (
    contains_aggregate,
    lower_aggregate,
    with_aliases,
)
from dbt.adapters.dyntable.differentiation.lowering.clauses import (
    SELECT_CLAUSES,
    refuse_limit,
    refuse_unknown_clauses,
)
from dbt.adapters.dyntable.differentiation.lowering.expressions import column, output_name
from dbt.adapters.dyntable.differentiation.lowering.relations import lower_from
from dbt.adapters.dyntable.differentiation.lowering.scope import Env, Scope
from dbt.adapters.dyntable.differentiation.lowering.where import lower_where
from dbt.adapters.dyntable.differentiation.lowering.windows import lower_windows
from dbt.adapters.dyntable.differentiation.plan import Distinct, Filter, Node, OneRow, Project
from dbt.adapters.dyntable.differentiation.sqltext import expr

if TYPE_CHECKING:
    from dbt.adapters.dyntable.differentiation.planner import Planner


def lower_select(
    planner: Planner, select: exp.Select, env: Env, outer: Optional[Scope]
) -> Tuple[Node, List[str]]:
    refuse_limit(select)
    refuse_unknown_clauses(select, SELECT_CLAUSES)
    if select.args.get("from_") is None:
        node: Node = OneRow(planner.names.mint("one"))
        scope = Scope([], outer)
    else:
        node, scope = lower_from(planner, select, env, outer)
    # Without is_local every conjunct is applied here; none is handed back.
    node, _ = lower_where(planner, node, scope, select.args.get("where"), env)

    expanded = _expand_stars(planner, select.expressions, scope)
    items = [item for item, _ in expanded]

    def translated(item: exp.Expression, resolved: Optional[exp.Expression]) -> exp.Expression:
        return (
            resolved.copy()
            if resolved is not None
            else planner.translate(cast(exp.Expression, item.unalias()), scope)
        )

    aliases = {item.alias.lower(): item.this for item in items if isinstance(item, exp.Alias)}
    group = select.args.get("group")
    having = select.args.get("having")
    aggregated = group is not None or having is not None or any(contains_aggregate(item) for item in items)
    if aggregated:
        node, substitute = lower_aggregate(planner, node, scope, items, group, aliases)
        expressions = [substitute(translated(item, resolved)) for item, resolved in expanded]
        if having is not None:
            condition = with_aliases(having.this, aliases, scope)
            node = Filter(node, substitute(planner.translate(condition, scope)))
    else:
        expressions = [translated(item, resolved) for item, resolved in expanded]

    node, expressions = lower_windows(planner, node, expressions)
    out_names = [output_name(item) for item in items]
    names = [planner.names.mint(n) for n in out_names]
    node = Project(node, expressions, names)
    if select.args.get("distinct") is not None:
        if select.args["distinct"].args.get("on"):
            raise NotIncrementalizable("distinct on", expr(select)[:200], "DISTINCT ON is not Spark SQL")
        node = Distinct(node)
    return node, out_names


def _expand_stars(
    planner: Planner, items: List[exp.Expression], scope: Scope
) -> List[Tuple[exp.Expression, Optional[exp.Expression]]]:
    """Select items with ``*`` and ``t.*`` expanded; expanded columns come with their plan
    expression already resolved (the second element), other items with None."""
    expanded: List[Tuple[exp.Expression, Optional[exp.Expression]]] = []
    for item in items:
        if isinstance(item, exp.Star):
            if item.args.get("except") or item.args.get("replace"):
                raise NotIncrementalizable("star", expr(item), "* EXCEPT/REPLACE is not supported")
            sources = scope.sources
        elif isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
            source = scope.by_alias(item.table)
            if source is None:
                raise NotIncrementalizable("star", expr(item), f"no relation named {item.table}")
            sources = [source]
        else:
            expanded.append((item, None))
            continue
        if not sources:
            raise NotIncrementalizable("star", expr(item), "* without a FROM clause")
        # As in Spark, `*` over a USING join lists each USING column once, first.
        merged = scope.using if len(sources) > 1 else {}
        columns: List[Tuple[str, exp.Expression]] = list(merged.values())
        for source in sources:
            for name, internal in source.star(planner.names, expr(item)):
                if name.lower() not in merged:
                    columns.append((name, column(internal)))
        for name, resolved in columns:
            alias = cast(exp.Expression, exp.alias_(exp.column(name, quoted=True), name, quoted=True))
            expanded.append((alias, resolved))
    return expanded
