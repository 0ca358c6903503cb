"""WHERE: filters, and [NOT] EXISTS / [NOT] IN subqueries as semi and anti joins."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, List, Optional, Set, Tuple, cast

from sqlglot import exp

from dbt.adapters.dyntable.differentiation.errors import NotIncrementalizable
from dbt.adapters.dyntable.differentiation.lowering.aggregates import contains_aggregate
from dbt.adapters.dyntable.differentiation.lowering.clauses import refuse_limit
from dbt.adapters.dyntable.differentiation.lowering.expressions import column, conjunction, conjuncts
from dbt.adapters.dyntable.differentiation.lowering.relations import lower_from
from dbt.adapters.dyntable.differentiation.lowering.scope import Env, Scope
from dbt.adapters.dyntable.differentiation.plan import Filter, Node, SemiJoin
from dbt.adapters.dyntable.differentiation.sqltext import expr

if TYPE_CHECKING:
    from dbt.adapters.dyntable.differentiation.planner import Planner


def lower_where(
    planner: Planner,
    node: Node,
    scope: Scope,
    where: Optional[exp.Where],
    env: Env,
    is_local: Optional[Callable[[str], bool]] = None,
) -> Tuple[Node, List[exp.Expression]]:
    """Filters and semi/anti joins for ``where``; with ``is_local``, the conjuncts that read a
    column for which it is false (outer columns) are returned instead of applied."""
    plain: List[exp.Expression] = []
    correlated: List[exp.Expression] = []
    subqueries: List[exp.Expression] = []
    for part in conjuncts(where.this if where is not None else None):
        if _subquery_predicate(part) is not None:
            subqueries.append(part)
            continue
        translated = planner.translate(part, scope)
        if is_local is not None and not all(is_local(c.name) for c in translated.find_all(exp.Column)):
            correlated.append(translated)
        else:
            plain.append(translated)
    condition = conjunction(plain)
    if condition is not None:
        node = Filter(node, condition)
    for part in subqueries:
        node = _lower_subquery_predicate(planner, node, scope, part, env)
    return node, correlated


def _subquery_predicate(
    part: exp.Expression,
) -> Optional[Tuple[bool, exp.Expression]]:
    """(negated, EXISTS/IN node) when ``part`` is [NOT] EXISTS (...) or [NOT] x IN (SELECT ...)."""
    negated = False
    inner = part
    while isinstance(inner, exp.Paren):
        inner = inner.this
    if isinstance(inner, exp.Not):
        negated, inner = True, inner.this
        while isinstance(inner, exp.Paren):
            inner = inner.this
    if isinstance(inner, exp.Exists):
        return negated, inner
    if isinstance(inner, exp.In) and inner.args.get("query") is not None:
        return negated, inner
    return None


def _lower_subquery_predicate(
    planner: Planner, node: Node, scope: Scope, part: exp.Expression, env: Env
) -> Node:
    found = _subquery_predicate(part)
    assert found is not None
    negated, predicate = found
    if isinstance(predicate, exp.Exists):
        query = predicate.this
        lhs = None
    else:
        query = predicate.args["query"]
        lhs = predicate.this
        if isinstance(lhs, exp.Tuple):
            raise NotIncrementalizable("in", expr(part), "multi-column IN (subquery)")
    while isinstance(query, exp.Subquery):
        query = query.this
    right, theta, value = _lower_predicate_subquery(planner, query, scope, env, lhs is not None, part)
    if lhs is not None:
        assert value is not None
        left_value = planner.translate(lhs, scope)
        equal: exp.Expression = exp.EQ(this=left_value, expression=value)
        if negated:
            # x NOT IN (S) is TRUE only when no y in S equals x and no comparison is unknown:
            # a NULL on either side makes the row disappear, unless S is empty.
            equal = cast(
                exp.Expression,
                exp.or_(
                    equal,
                    exp.Is(this=left_value.copy(), expression=exp.null()),
                    exp.Is(this=value.copy(), expression=exp.null()),
                ),
            )
        theta.append(equal)
    return SemiJoin(node, right, conjunction(theta) or exp.true(), anti=negated)


def _lower_predicate_subquery(
    planner: Planner,
    query: exp.Expression,
    scope: Scope,
    env: Env,
    wants_value: bool,
    part: exp.Expression,
) -> Tuple[Node, List[exp.Expression], Optional[exp.Expression]]:
    """The subquery as a relation, the join condition it implies, and its IN value."""
    simple = (
        isinstance(query, exp.Select)
        and query.args.get("from_") is not None
        and not any(query.args.get(a) for a in ("group", "having", "distinct", "with_"))
        and not any(contains_aggregate(i) or i.find(exp.Window) for i in query.expressions)
    )
    if simple:
        assert isinstance(query, exp.Select)
        refuse_limit(query)
        node, inner_scope = lower_from(planner, query, env, scope)
        local = node
        node, correlated = lower_where(
            planner,
            node,
            inner_scope,
            query.args.get("where"),
            env,
            is_local=lambda name: name in set(local.columns),
        )
        value = None
        if wants_value:
            if len(query.expressions) != 1 or isinstance(query.expressions[0], exp.Star):
                raise NotIncrementalizable("in", expr(part), "IN (subquery) must select one column")
            value = planner.translate(query.expressions[0].unalias(), inner_scope)
        return node, correlated, value
    _refuse_correlation(query, scope, part)
    node, names = planner.lower_query(query, env)
    value = None
    if wants_value:
        if len(names) != 1:
            raise NotIncrementalizable("in", expr(part), "IN (subquery) must select one column")
        value = column(node.columns[0])
    return node, [], value


def _refuse_correlation(query: exp.Expression, scope: Scope, part: exp.Expression) -> None:
    """A subquery planned on its own must not name a relation of an enclosing query (else a
    struct-field reading of ``outer.col`` could silently capture it)."""
    inner = {t.alias_or_name.lower() for t in query.find_all(exp.Table)}
    inner |= {s.alias.lower() for s in query.find_all(exp.Subquery) if s.alias}
    outer: Set[str] = set()
    current: Optional[Scope] = scope
    while current is not None:
        outer |= {source.alias.lower() for source in current.sources}
        current = current.outer
    for reference in query.find_all(exp.Column):
        qualifier = reference.table.lower()
        if qualifier and qualifier in outer and qualifier not in inner:
            raise NotIncrementalizable(
                "subquery",
                expr(part),
                "a correlated subquery may not use GROUP BY, aggregates, DISTINCT or set operations",
            )
