"""Window functions: one Window node per distinct PARTITION BY."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Tuple

from sqlglot import exp

from dbt.adapters.dyntable.differentiation.errors import NotIncrementalizable
from dbt.adapters.dyntable.differentiation.functions import (
    ORDER_INDEPENDENT_AGGREGATES,
    RANKING_FUNCTIONS,
    is_aggregate,
)
from dbt.adapters.dyntable.differentiation.lowering.expressions import column
from dbt.adapters.dyntable.differentiation.plan import Node, Window
from dbt.adapters.dyntable.differentiation.sqltext import expr

if TYPE_CHECKING:
    from dbt.adapters.dyntable.differentiation.planner import Planner


def lower_windows(
    planner: Planner, node: Node, expressions: List[exp.Expression]
) -> Tuple[Node, List[exp.Expression]]:
    """One Window node per distinct PARTITION BY, so that a touched partition is recomputed
    once for all the functions over it."""
    by_partition: Dict[str, Window] = {}
    lowered: List[exp.Expression] = []
    for expression in expressions:
        for window in list(expression.find_all(exp.Window)):
            partition = window.args.get("partition_by")
            if not partition:
                raise NotIncrementalizable(
                    "window",
                    expr(window),
                    "a window without PARTITION BY spans the whole input: any change recomputes every row",
                )
            function = window.this
            if not (
                isinstance(function, RANKING_FUNCTIONS + ORDER_INDEPENDENT_AGGREGATES)
                or (isinstance(function, exp.Anonymous) and is_aggregate(function))
            ):
                raise NotIncrementalizable(
                    "window", expr(window), f"window function {function.key} is not supported"
                )
            name = planner.names.mint(function.key)
            key = ", ".join(expr(p) for p in partition)
            if key not in by_partition:
                by_partition[key] = Window(node, [])
                node = by_partition[key]
            by_partition[key].functions.append((name, window.copy()))
            if window is expression:
                expression = column(name)
            else:
                window.replace(column(name))
        lowered.append(expression)
    return node, lowered
