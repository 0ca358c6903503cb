"""Lowering: a Spark SQL query (sqlglot AST) to the relational plan of ``plan.py``.

Views and CTEs are inlined where they are read (docs/ARCHITECTURE.md, "Planning and row keys"), so
every scan in the plan is a base table whose changes the resolver can describe. Columns are resolved
per SELECT scope, innermost first, then through the enclosing scopes (for correlated EXISTS / IN
subqueries). Without a ``schema`` for a base table, its columns are discovered from the references
to it; that needs unqualified columns to be unambiguous, and ``*`` over such a table cannot be
expanded. Each clause is lowered by a module of ``lowering/``; the :class:`Planner` holds what they
share and resolves their column references.
"""

from __future__ import annotations

from typing import FrozenSet, Iterator, List, Mapping, Optional, Sequence, Set, Tuple, Union, cast

from sqlglot import exp

from dbt.adapters.dyntable.differentiation.errors import NotIncrementalizable
from dbt.adapters.dyntable.differentiation.functions import nondeterminism
from dbt.adapters.dyntable.differentiation.lowering.clauses import refuse_limit
from dbt.adapters.dyntable.differentiation.lowering.expressions import column
from dbt.adapters.dyntable.differentiation.lowering.scope import Env, Scope
from dbt.adapters.dyntable.differentiation.lowering.select import lower_select
from dbt.adapters.dyntable.differentiation.lowering.set_operations import lower_intersect_except, lower_union
from dbt.adapters.dyntable.differentiation.plan import Names, Node, Plan, Scan
from dbt.adapters.dyntable.differentiation.sqltext import expr
from dbt.adapters.dyntable.differentiation.views import expand_views
from dbt.adapters.dyntable.vocabulary import table_name

#: A table's declared unique key (column names), or several candidate keys.
UniqueKeys = Union[Sequence[str], Sequence[Sequence[str]]]


def candidate_keys(keys: UniqueKeys) -> List[List[str]]:
    """One declared key or several, as a list of candidate keys.

    >>> candidate_keys(["id"]), candidate_keys([["id"], ["email", "region"]])
    ([['id']], [['id'], ['email', 'region']])
    """
    if all(isinstance(k, str) for k in keys):
        return [list(keys)] if keys else []  # type: ignore[arg-type]
    return [[key] if isinstance(key, str) else list(key) for key in keys]


class Planner:
    """What the clauses' lowerings share: fresh plan column names, the declared keys and
    schemas of base tables, and column resolution through the enclosing scopes."""

    def __init__(
        self,
        unique_keys: Mapping[str, UniqueKeys],
        deterministic_functions: FrozenSet[str],
        schema: Mapping[str, Sequence[str]],
    ) -> None:
        self.unique_keys = {table_name(k): candidate_keys(v) for k, v in unique_keys.items()}
        self.deterministic_functions = frozenset(f.lower() for f in deterministic_functions)
        self.schema = {table_name(k): list(v) for k, v in schema.items()}
        self.names = Names()

    def lower_query(
        self, query: exp.Expression, env: Env, outer: Optional[Scope] = None
    ) -> Tuple[Node, List[str]]:
        if isinstance(query, exp.Subquery):
            refuse_limit(query)
            return self.lower_query(query.this, env, outer)
        with_ = query.args.get("with_")
        if with_ is not None:
            if with_.args.get("recursive"):
                raise NotIncrementalizable(
                    "recursive cte", expr(with_), "recursive CTEs have no derivative here"
                )
            env = Env(dict(env.ctes))
            for cte in with_.expressions:
                aliases = [c.name for c in cte.args["alias"].columns] if cte.args.get("alias") else []
                env.ctes[cte.alias.lower()] = (cte.this, Env(dict(env.ctes)), aliases)
        if isinstance(query, exp.Union):
            return lower_union(self, query, env, outer)
        if isinstance(query, (exp.Intersect, exp.Except)):
            return lower_intersect_except(self, query, env, outer)
        if isinstance(query, exp.Select):
            return lower_select(self, query, env, outer)
        raise NotIncrementalizable(
            query.key, expr(query)[:200], "only SELECT queries and UNION [ALL] can be maintained"
        )

    # -- expressions -----------------------------------------------------------------------------

    def translate(self, expression: exp.Expression, scope: Scope) -> exp.Expression:
        """``expression`` over the plan's column names, after checking it is deterministic."""
        # sqlglot 30 types the nodes of a walk as Expr, the base of Expression.
        for node in cast(Iterator[exp.Expression], expression.walk()):
            if isinstance(node, (exp.Subquery, exp.Select, exp.Exists)):
                raise NotIncrementalizable(
                    "subquery",
                    expr(expression),
                    "subqueries are supported only as WHERE conjuncts: [NOT] EXISTS, [NOT] IN",
                )
            reason = nondeterminism(node, self.deterministic_functions)
            if reason is not None:
                raise NotIncrementalizable("function", expr(node), reason)
        translated = expression.copy()
        for reference in list(translated.find_all(exp.Column)):
            if isinstance(reference.this, exp.Star):
                raise NotIncrementalizable("star", expr(expression), "* inside an expression")
            resolved = self.resolve(reference, scope)
            if reference is translated:
                return resolved
            reference.replace(resolved)
        return translated

    def resolve(self, reference: exp.Column, scope: Scope) -> exp.Expression:
        """The plan expression a column reference denotes, innermost scope first. ``a.b`` is
        column ``b`` of relation ``a`` if some enclosing scope has a relation ``a``, else field
        ``b`` of struct column ``a``."""
        parts = [p.name for p in reference.parts]
        fragment = expr(reference)
        current: Optional[Scope] = scope
        while len(parts) > 1 and current is not None:
            source = current.by_alias(parts[0])
            if source is not None:
                if not source.can_have(parts[1]):
                    raise NotIncrementalizable("column", fragment, f"{source.alias} has no column {parts[1]}")
                return _fields(column(source.lookup(parts[1], self.names)), parts[2:])
            current = current.outer
        current = scope
        while current is not None:
            found = self._resolve_unqualified(parts[0], parts[1:], current, fragment)
            if found is not None:
                return found
            current = current.outer
        raise NotIncrementalizable(
            "column",
            fragment,
            "column cannot be resolved (outer columns can be read only in the WHERE of a "
            "[NOT] EXISTS / [NOT] IN subquery without GROUP BY, DISTINCT or set operations)",
        )

    def _resolve_unqualified(
        self, name: str, fields: List[str], scope: Scope, fragment: str
    ) -> Optional[exp.Expression]:
        if name.lower() in scope.using:
            return _fields(scope.using[name.lower()][1].copy(), fields)
        candidates = [s for s in scope.sources if s.can_have(name)]
        if not candidates:
            return None
        if len(candidates) > 1:
            raise NotIncrementalizable(
                "column",
                fragment,
                f"unqualified column {name} may belong to more than one relation; qualify it "
                "with its table alias (or pass the tables' schemas)",
            )
        return _fields(column(candidates[0].lookup(name, self.names)), fields)


def _fields(base: exp.Expression, fields: List[str]) -> exp.Expression:
    """Struct field access ``base.f1.f2``."""
    for name in fields:
        base = exp.Dot(this=base, expression=exp.to_identifier(name, quoted=True))
    return base


def plan_query(
    sql: str,
    views: Optional[Mapping[str, str]] = None,
    unique_keys: Optional[Mapping[str, UniqueKeys]] = None,
    deterministic_functions: FrozenSet[str] = frozenset(),
    schema: Optional[Mapping[str, Sequence[str]]] = None,
    default_schema: Optional[str] = None,
) -> Plan:
    """Lower ``sql`` to a plan, or raise :class:`NotIncrementalizable`.

    ``views`` maps view names to their SQL (inlined by :func:`~.views.expand_views`, the path
    every reader of a DT's query takes; ``default_schema`` qualifies bare table names there),
    ``unique_keys`` declares the unique columns of base tables (one key or a list of candidate keys
    per table), ``deterministic_functions`` names UDFs that are safe to re-evaluate, and ``schema``
    optionally lists the columns of base tables (needed for ``*``).

    >>> plan = plan_query("select c.country, count(*) as n from s.orders o "
    ...                   "join s.customers c on o.customer_id = c.id group by c.country")
    >>> plan.sources, plan.columns, plan.row_key
    (['s.customers', 's.orders'], ['country', 'n'], ['country'])
    >>> plan_query("select id, rand() as r from s.orders")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dbt.adapters.dyntable.differentiation.errors.NotIncrementalizable: function: rand is not ...
    """
    planner = Planner(unique_keys or {}, deterministic_functions, schema or {})
    query = expand_views(sql, views or {}, default_schema)
    root, names = planner.lower_query(query, Env())
    seen: Set[str] = set()
    for name in names:
        if name.lower() in seen:
            raise NotIncrementalizable(
                "select", name, "the query returns two columns with this name; alias one of them"
            )
        seen.add(name.lower())
    for node in root.walk():
        if isinstance(node, Scan) and not node.columns:
            # A scan read only for its row count (count(*)) still needs a column to carry rows.
            node.source_columns.append(None)
            node.output_columns.append(planner.names.mint("row"))
    return Plan(sql, root, names)
