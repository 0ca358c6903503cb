"""FROM and its joins: base tables, CTEs and subqueries as relations column resolution can see."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Optional, Tuple, cast

from sqlglot import exp

from dbt.adapters.dyntable.differentiation.errors import NotIncrementalizable
from dbt.adapters.dyntable.differentiation.lowering.clauses import (
    JOIN_CLAUSES,
    TABLE_CLAUSES,
    refuse_limit,
    refuse_unknown_clauses,
)
from dbt.adapters.dyntable.differentiation.lowering.expressions import column, conjunction
from dbt.adapters.dyntable.differentiation.lowering.scope import Env, Scope, Source
from dbt.adapters.dyntable.differentiation.plan import Join, Node, Scan, SemiJoin
from dbt.adapters.dyntable.differentiation.sqltext import expr
from dbt.adapters.dyntable.vocabulary import table_name

if TYPE_CHECKING:
    from dbt.adapters.dyntable.differentiation.planner import Planner


def lower_from(planner: Planner, select: exp.Select, env: Env, outer: Optional[Scope]) -> Tuple[Node, Scope]:
    first = _lower_relation(planner, select.args["from_"].this, env)
    scope = Scope([first], outer)
    node = first.node
    for join in select.args.get("joins") or []:
        refuse_unknown_clauses(join, JOIN_CLAUSES)
        if join.args.get("method"):
            raise NotIncrementalizable(
                "natural join", expr(join), "NATURAL joins need the tables' schemas; write ON"
            )
        source = _lower_relation(planner, join.this, env)
        side = (join.side or "").upper()
        kind = (join.kind or "").upper()
        on = join.args.get("on")
        if kind in ("SEMI", "ANTI"):
            both = Scope(scope.sources + [source], outer)
            condition = planner.translate(on, both) if on is not None else exp.true()
            node = SemiJoin(node, source.node, condition, anti=kind == "ANTI")
            continue
        using = join.args.get("using") or []
        parts: List[exp.Expression] = []
        for identifier in using:
            left_column = planner.resolve(exp.column(identifier.name), scope)
            if not source.can_have(identifier.name):
                raise NotIncrementalizable(
                    "join", expr(join), f"USING column {identifier.name} is not in {source.alias}"
                )
            right_column = column(source.lookup(identifier.name, planner.names))
            parts.append(exp.EQ(this=left_column, expression=right_column))
            merged: exp.Expression = left_column
            if side == "RIGHT":
                merged = right_column
            elif side == "FULL":
                merged = cast(exp.Expression, exp.func("coalesce", left_column, right_column))
            scope.using[identifier.name.lower()] = (identifier.name, merged)
        scope.sources.append(source)
        if on is not None:
            parts.append(planner.translate(on, scope))
        join_kind = {"LEFT": "left", "RIGHT": "right", "FULL": "full"}.get(side, "inner")
        node = Join(join_kind, node, source.node, conjunction(parts))
    return node, scope


def _lower_relation(planner: Planner, relation: exp.Expression, env: Env) -> Source:
    if isinstance(relation, exp.Subquery):
        node, names = planner.lower_query(relation.this, env)
        refuse_limit(relation)
        return _closed_source(relation.alias_or_name or "_subquery", node, names, relation)
    if not isinstance(relation, exp.Table) or not isinstance(relation.this, exp.Identifier):
        raise NotIncrementalizable(
            "relation", expr(relation), "only tables, views, CTEs and subqueries can be read"
        )
    if relation.args.get("version") or relation.args.get("when"):
        raise NotIncrementalizable(
            "time travel", expr(relation), "a fixed table version never changes; read the table"
        )
    refuse_unknown_clauses(relation, TABLE_CLAUSES)
    key = table_name(relation)
    alias = relation.alias_or_name
    if not relation.db and key in env.ctes:
        definition, cte_env, aliases = env.ctes[key]
        node, names = planner.lower_query(definition, cte_env)
        return _closed_source(alias, node, aliases or names, relation)
    table_alias = relation.args.get("alias")
    if table_alias is not None and table_alias.columns:
        raise NotIncrementalizable(
            "relation", expr(relation), "column aliases on a base table are not supported"
        )
    scan = Scan(key, unique_keys=planner.unique_keys.get(key, []))
    return Source(alias, scan, scan=scan, schema=planner.schema.get(key))


def _closed_source(alias: str, node: Node, names: List[str], relation: exp.Expression) -> Source:
    table_alias = relation.args.get("alias")
    if table_alias is not None and table_alias.columns:
        renamed = [c.name for c in table_alias.columns]
        if len(renamed) != len(names):
            raise NotIncrementalizable(
                "relation", expr(relation), "column alias list does not match the columns"
            )
        names = renamed
    if len(names) != len(node.columns):
        raise NotIncrementalizable("relation", expr(relation), "column alias list does not match the columns")
    known: Dict[str, str] = {}
    for name, internal in zip(names, node.columns):
        known.setdefault(name.lower(), internal)
    return Source(alias, node, known=known, order=list(names))
