"""UNION [ALL], INTERSECT and EXCEPT."""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Tuple

from sqlglot import exp

from dbt.adapters.dyntable.differentiation.errors import NotIncrementalizable
from dbt.adapters.dyntable.differentiation.lowering.clauses import (
    UNION_CLAUSES,
    refuse_limit,
    refuse_unknown_clauses,
)
from dbt.adapters.dyntable.differentiation.lowering.expressions import column, conjunction
from dbt.adapters.dyntable.differentiation.lowering.scope import Env, Scope
from dbt.adapters.dyntable.differentiation.plan import Distinct, Node, SemiJoin, UnionAll
from dbt.adapters.dyntable.differentiation.sqltext import expr

if TYPE_CHECKING:
    from dbt.adapters.dyntable.differentiation.planner import Planner


def lower_union(
    planner: Planner, union: exp.Union, env: Env, outer: Optional[Scope]
) -> Tuple[Node, List[str]]:
    refuse_limit(union)
    refuse_unknown_clauses(union, UNION_CLAUSES)
    left, left_names = planner.lower_query(union.this, env, outer)
    right, right_names = planner.lower_query(union.expression, env, outer)
    if len(left_names) != len(right_names):
        raise NotIncrementalizable(
            "union", expr(union)[:200], "the branches have different numbers of columns"
        )
    inputs: List[Node] = []
    for branch in (left, right):
        # Flatten chains of UNION ALL into one n-ary union: fewer nested subqueries.
        if isinstance(branch, UnionAll):
            inputs.extend(branch.inputs)
        else:
            inputs.append(branch)
    node: Node = UnionAll(inputs, [planner.names.mint(n) for n in left_names])
    if union.args.get("distinct"):
        node = Distinct(node)
    return node, left_names


def lower_intersect_except(
    planner: Planner, query: exp.SetOperation, env: Env, outer: Optional[Scope]
) -> Tuple[Node, List[str]]:
    """INTERSECT / EXCEPT (DISTINCT): the distinct rows of the left input with / without an
    equal row (NULLs equal, as set operations compare them) in the right input."""
    refuse_limit(query)
    refuse_unknown_clauses(query, UNION_CLAUSES)
    if not query.args.get("distinct"):
        raise NotIncrementalizable(
            query.key, expr(query)[:200], f"{query.key.upper()} ALL is not differentiated"
        )
    left, left_names = planner.lower_query(query.this, env, outer)
    right, right_names = planner.lower_query(query.expression, env, outer)
    if len(left_names) != len(right_names):
        raise NotIncrementalizable(
            query.key, expr(query)[:200], "the inputs have different numbers of columns"
        )
    equal = [
        exp.NullSafeEQ(this=column(a), expression=column(b)) for a, b in zip(left.columns, right.columns)
    ]
    anti = isinstance(query, exp.Except)
    condition = conjunction(equal)
    assert condition is not None
    return Distinct(SemiJoin(left, right, condition, anti=anti)), left_names
