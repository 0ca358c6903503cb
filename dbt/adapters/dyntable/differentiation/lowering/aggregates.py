"""GROUP BY, HAVING and aggregates: an Aggregate node and the select items rewritten over it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Set, Tuple

from sqlglot import exp

from dbt.adapters.dyntable.differentiation.errors import NotIncrementalizable
from dbt.adapters.dyntable.differentiation.functions import ORDER_INDEPENDENT_AGGREGATES, is_aggregate
from dbt.adapters.dyntable.differentiation.lowering.expressions import column, output_name
from dbt.adapters.dyntable.differentiation.lowering.scope import Scope
from dbt.adapters.dyntable.differentiation.plan import Aggregate, Node
from dbt.adapters.dyntable.differentiation.sqltext import expr

if TYPE_CHECKING:
    from dbt.adapters.dyntable.differentiation.planner import Planner


def contains_aggregate(expression: exp.Expression) -> bool:
    """Whether ``expression`` aggregates rows of its own SELECT (an aggregate inside a window
    or a subquery does not)."""

    def visit(node: exp.Expression) -> bool:
        if isinstance(node, (exp.Window, exp.Subquery, exp.Select)):
            return False
        if is_aggregate(node):
            return True
        return any(visit(child) for child in node.iter_expressions())

    return visit(expression)


def with_aliases(
    expression: exp.Expression, aliases: Dict[str, exp.Expression], scope: Scope
) -> exp.Expression:
    """Replace unqualified references to select-list aliases (that are not also columns of a
    source whose columns are all known) by the aliased expression, as Spark resolves them in
    GROUP BY and HAVING."""

    def replace(node: exp.Expression) -> exp.Expression:
        if (
            isinstance(node, exp.Column)
            and not node.table
            and node.name.lower() in aliases
            and not any(s.has(node.name) for s in scope.sources)
        ):
            return aliases[node.name.lower()].copy()
        return node

    return expression.copy().transform(replace)


def lower_aggregate(
    planner: Planner,
    node: Node,
    scope: Scope,
    items: List[exp.Expression],
    group: Optional[exp.Group],
    aliases: Dict[str, exp.Expression],
) -> Tuple[Node, Callable[[exp.Expression], exp.Expression]]:
    """The Aggregate over ``node``, and how to rewrite a select item over its output (group
    keys and aggregates become its columns; the aggregates are collected as they are met)."""
    keys = _group_keys(planner, scope, items, group, aliases)
    key_by_sql = {expr(translated): name for name, translated in keys}
    aggregates: List[Tuple[str, exp.Expression]] = []
    aggregate_by_sql: Dict[str, str] = {}

    def substitute(expression: exp.Expression) -> exp.Expression:
        text = expr(expression)
        if text in key_by_sql:
            return column(key_by_sql[text])
        if isinstance(expression, exp.Window):
            _substitute_window(expression, substitute)
            return expression
        if is_aggregate(expression):
            _refuse_order_dependent(expression, text)
            if text not in aggregate_by_sql:
                name = planner.names.mint(expression.key)
                aggregates.append((name, expression))
                aggregate_by_sql[text] = name
            return column(aggregate_by_sql[text])
        if isinstance(expression, exp.Column):
            raise NotIncrementalizable("aggregate", text, "column is neither grouped nor inside an aggregate")
        for child in list(expression.iter_expressions()):
            _replace(child, substitute(child))
        return expression

    return Aggregate(node, keys, aggregates), substitute


def _group_keys(
    planner: Planner,
    scope: Scope,
    items: List[exp.Expression],
    group: Optional[exp.Group],
    aliases: Dict[str, exp.Expression],
) -> List[Tuple[str, exp.Expression]]:
    """The GROUP BY expressions (positions and select aliases resolved), once each, named."""
    if group is None:
        return []
    for unsupported in ("rollup", "cube", "grouping_sets"):
        if group.args.get(unsupported):
            raise NotIncrementalizable("group by", expr(group), f"{unsupported.upper()} is not supported")
    keys: List[Tuple[str, exp.Expression]] = []
    seen: Set[str] = set()
    for expression in group.expressions:
        if isinstance(expression, exp.Literal) and expression.is_int:
            position = int(expression.name)
            if not 1 <= position <= len(items):
                raise NotIncrementalizable("group by", expr(group), "GROUP BY position out of range")
            expression = items[position - 1].unalias()
        else:
            expression = with_aliases(expression, aliases, scope)
        translated = planner.translate(expression, scope)
        if expr(translated) not in seen:
            seen.add(expr(translated))
            keys.append((planner.names.mint(output_name(expression)), translated))
    return keys


def _substitute_window(window: exp.Window, substitute: Callable[[exp.Expression], exp.Expression]) -> None:
    """Rewrite a window over an aggregate's output: its arguments, partition and order."""
    for child in list(window.this.iter_expressions()):
        _replace(child, substitute(child))
    for child in list(window.args.get("partition_by") or []):
        _replace(child, substitute(child))
    order = window.args.get("order")
    for ordered in order.expressions if order is not None else []:
        _replace(ordered.this, substitute(ordered.this))


def _refuse_order_dependent(aggregate: exp.Expression, text: str) -> None:
    if not isinstance(aggregate, (ORDER_INDEPENDENT_AGGREGATES, exp.Anonymous)):
        raise NotIncrementalizable(
            "aggregate",
            text,
            f"{aggregate.key} depends on the order rows arrive in, so recomputing a "
            "group may not reproduce the stored value",
        )


def _replace(old: exp.Expression, new: exp.Expression) -> None:
    if new is not old:
        old.replace(new)
