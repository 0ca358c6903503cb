"""Lowering: a Spark SQL query (sqlglot AST) to the relational plan of ``plan.py``.

Views and CTEs are inlined where they are read (docs/ARCHITECTURE.md, "Planning and row keys"), so
every scan in the plan is a base table whose changes the resolver can describe. Columns are resolved
per SELECT scope, innermost first, then through the enclosing scopes (for correlated EXISTS / IN
subqueries). Without a ``schema`` for a base table, its columns are discovered from the references
to it; that needs unqualified columns to be unambiguous, and ``*`` over such a table cannot be
expanded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import (
    Callable,
    Dict,
    FrozenSet,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Set,
    Tuple,
    Union,
    cast,
)

from sqlglot import exp

from dbt.adapters.dyntable.differentiation.errors import NotIncrementalizable
from dbt.adapters.dyntable.differentiation.functions import (
    ORDER_INDEPENDENT_AGGREGATES,
    RANKING_FUNCTIONS,
    is_aggregate,
    nondeterminism,
)
from dbt.adapters.dyntable.differentiation.plan import (
    Aggregate,
    Distinct,
    Filter,
    Join,
    Names,
    Node,
    OneRow,
    Plan,
    Project,
    Scan,
    SemiJoin,
    UnionAll,
    Window,
)
from dbt.adapters.dyntable.differentiation.sqltext import expr
from dbt.adapters.dyntable.differentiation.views import expand_views
from dbt.adapters.dyntable.vocabulary import table_name


def column(name: str) -> exp.Column:
    return exp.column(name, quoted=True)


def conjuncts(condition: Optional[exp.Expression]) -> List[exp.Expression]:
    if condition is None:
        return []
    if isinstance(condition, exp.And):
        return conjuncts(condition.this) + conjuncts(condition.expression)
    if isinstance(condition, exp.Paren):
        return conjuncts(condition.this)
    return [condition]


def conjunction(parts: Sequence[exp.Expression]) -> Optional[exp.Expression]:
    return cast(exp.Expression, exp.and_(*parts)) if parts else None


def output_name(item: exp.Expression) -> str:
    """The column name Spark gives a select item (aliases and plain columns keep theirs)."""
    if isinstance(item, exp.Alias):
        return item.alias
    if isinstance(item, exp.Column):
        return item.name
    if isinstance(item, exp.Dot):
        return item.name
    return expr(item).lower()


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


@dataclass
class Source:
    """One relation in a FROM clause, as seen by column resolution."""

    alias: str
    node: Node
    known: Dict[str, str] = field(default_factory=dict)  # lower-case name -> plan column
    order: List[str] = field(default_factory=list)  # names in output order, for `*`
    scan: Optional[Scan] = None  # set while columns of a base table can still be discovered
    schema: Optional[List[str]] = None  # the base table's declared columns, if given

    @property
    def certain(self) -> bool:
        """Whether ``known`` (or ``schema``) lists every column this source has."""
        return self.scan is None or self.schema is not None

    def has(self, name: str) -> bool:
        if name.lower() in self.known:
            return True
        return self.schema is not None and name.lower() in {c.lower() for c in self.schema}

    def can_have(self, name: str) -> bool:
        """Whether ``name`` is, or for all the planner knows may be, a column of this source."""
        return self.has(name) or not self.certain

    def lookup(self, name: str, names: Names) -> str:
        key = name.lower()
        if key not in self.known:
            assert self.scan is not None, "closed sources only answer for their known columns"
            spelled = name
            if self.schema is not None:
                spelled = next(c for c in self.schema if c.lower() == key)
            internal = names.mint(spelled)
            self.scan.source_columns.append(spelled)
            self.scan.output_columns.append(internal)
            self.known[key] = internal
            self.order.append(spelled)
        return self.known[key]

    def star(self, names: Names, fragment: str) -> List[Tuple[str, str]]:
        if self.scan is not None:
            if self.schema is None:
                raise NotIncrementalizable(
                    "star",
                    fragment,
                    f"the columns of {self.scan.table} are not known while planning; list the "
                    "columns or pass the table's schema",
                )
            return [(c, self.lookup(c, names)) for c in self.schema]
        return [(name, self.known[name.lower()]) for name in self.order]


@dataclass
class Scope:
    sources: List[Source]
    outer: Optional["Scope"] = None
    #: USING columns by lower-case name: their spelling and the expression Spark gives them.
    using: Dict[str, Tuple[str, exp.Expression]] = field(default_factory=dict)

    def by_alias(self, alias: str) -> Optional[Source]:
        for source in self.sources:
            if source.alias.lower() == alias.lower():
                return source
        return None


@dataclass
class Env:
    """CTEs visible at a point of the query: name -> (definition, the env it was defined in)."""

    ctes: Dict[str, Tuple[exp.Expression, "Env", List[str]]] = field(default_factory=dict)


class Planner:
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

    # -- queries ---------------------------------------------------------------------------------

    def lower_query(
        self, query: exp.Expression, env: Env, outer: Optional[Scope] = None
    ) -> Tuple[Node, List[str]]:
        if isinstance(query, exp.Subquery):
            self._refuse_limit(query)
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
            return self._lower_union(query, env, outer)
        if isinstance(query, (exp.Intersect, exp.Except)):
            return self._lower_intersect_except(query, env, outer)
        if isinstance(query, exp.Select):
            return self._lower_select(query, env, outer)
        raise NotIncrementalizable(
            query.key, expr(query)[:200], "only SELECT queries and UNION [ALL] can be maintained"
        )

    def _refuse_limit(self, query: exp.Expression) -> None:
        for arg in ("limit", "offset", "fetch"):
            if query.args.get(arg) is not None:
                raise NotIncrementalizable(
                    "limit",
                    expr(query.args[arg]),
                    "LIMIT/OFFSET picks rows by position, so a change anywhere can change which "
                    "rows are kept",
                )

    def _lower_union(self, union: exp.Union, env: Env, outer: Optional[Scope]) -> Tuple[Node, List[str]]:
        self._refuse_limit(union)
        _refuse_unknown_clauses(union, UNION_CLAUSES)
        left, left_names = self.lower_query(union.this, env, outer)
        right, right_names = self.lower_query(union.expression, env, outer)
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
        node: Node = UnionAll(inputs, [self.names.mint(n) for n in left_names])
        if union.args.get("distinct"):
            node = Distinct(node)
        return node, left_names

    def _lower_intersect_except(
        self, query: exp.SetOperation, env: Env, outer: Optional[Scope]
    ) -> Tuple[Node, List[str]]:
        """INTERSECT / EXCEPT (DISTINCT): the distinct rows of the left input with / without an
        equal row (NULLs equal, as set operations compare them) in the right input."""
        self._refuse_limit(query)
        _refuse_unknown_clauses(query, UNION_CLAUSES)
        if not query.args.get("distinct"):
            raise NotIncrementalizable(
                query.key, expr(query)[:200], f"{query.key.upper()} ALL is not differentiated"
            )
        left, left_names = self.lower_query(query.this, env, outer)
        right, right_names = self.lower_query(query.expression, env, outer)
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

    # -- SELECT ----------------------------------------------------------------------------------

    def _lower_select(self, select: exp.Select, env: Env, outer: Optional[Scope]) -> Tuple[Node, List[str]]:
        self._refuse_limit(select)
        _refuse_unknown_clauses(select, SELECT_CLAUSES)
        if select.args.get("from_") is None:
            node: Node = OneRow(self.names.mint("one"))
            scope = Scope([], outer)
        else:
            node, scope = self._lower_from(select, env, outer)
        # Without is_local every conjunct is applied here; none is handed back.
        node, _ = self._lower_where(node, scope, select.args.get("where"), env)

        expanded = self._expand_stars(select.expressions, scope)
        items = [item for item, _ in expanded]

        def translated(item: exp.Expression, resolved: Optional[exp.Expression]) -> exp.Expression:
            return (
                resolved.copy()
                if resolved is not None
                else self.translate(cast(exp.Expression, item.unalias()), scope)
            )

        aliases = {item.alias.lower(): item.this for item in items if isinstance(item, exp.Alias)}
        group = select.args.get("group")
        having = select.args.get("having")
        aggregated = (
            group is not None or having is not None or any(self._contains_aggregate(item) for item in items)
        )
        if aggregated:
            node, substitute = self._lower_aggregate(node, scope, items, group, aliases)
            expressions = [substitute(translated(item, resolved)) for item, resolved in expanded]
            if having is not None:
                condition = self._with_aliases(having.this, aliases, scope)
                node = Filter(node, substitute(self.translate(condition, scope)))
        else:
            expressions = [translated(item, resolved) for item, resolved in expanded]

        node, expressions = self._lower_windows(node, expressions)
        out_names = [output_name(item) for item in items]
        names = [self.names.mint(n) for n in out_names]
        node = Project(node, expressions, names)
        if select.args.get("distinct") is not None:
            if select.args["distinct"].args.get("on"):
                raise NotIncrementalizable("distinct on", expr(select)[:200], "DISTINCT ON is not Spark SQL")
            node = Distinct(node)
        return node, out_names

    def _expand_stars(
        self, items: List[exp.Expression], scope: Scope
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
                for name, internal in source.star(self.names, expr(item)):
                    if name.lower() not in merged:
                        columns.append((name, column(internal)))
            for name, resolved in columns:
                alias = cast(exp.Expression, exp.alias_(exp.column(name, quoted=True), name, quoted=True))
                expanded.append((alias, resolved))
        return expanded

    # -- FROM ------------------------------------------------------------------------------------

    def _lower_from(self, select: exp.Select, env: Env, outer: Optional[Scope]) -> Tuple[Node, Scope]:
        first = self._lower_relation(select.args["from_"].this, env)
        scope = Scope([first], outer)
        node = first.node
        for join in select.args.get("joins") or []:
            _refuse_unknown_clauses(join, JOIN_CLAUSES)
            if join.args.get("method"):
                raise NotIncrementalizable(
                    "natural join", expr(join), "NATURAL joins need the tables' schemas; write ON"
                )
            source = self._lower_relation(join.this, env)
            side = (join.side or "").upper()
            kind = (join.kind or "").upper()
            on = join.args.get("on")
            if kind in ("SEMI", "ANTI"):
                both = Scope(scope.sources + [source], outer)
                condition = self.translate(on, both) if on is not None else exp.true()
                node = SemiJoin(node, source.node, condition, anti=kind == "ANTI")
                continue
            using = join.args.get("using") or []
            parts: List[exp.Expression] = []
            for identifier in using:
                left_column = self.resolve(exp.column(identifier.name), scope)
                if not source.can_have(identifier.name):
                    raise NotIncrementalizable(
                        "join", expr(join), f"USING column {identifier.name} is not in {source.alias}"
                    )
                right_column = column(source.lookup(identifier.name, self.names))
                parts.append(exp.EQ(this=left_column, expression=right_column))
                merged: exp.Expression = left_column
                if side == "RIGHT":
                    merged = right_column
                elif side == "FULL":
                    merged = cast(exp.Expression, exp.func("coalesce", left_column, right_column))
                scope.using[identifier.name.lower()] = (identifier.name, merged)
            scope.sources.append(source)
            if on is not None:
                parts.append(self.translate(on, scope))
            join_kind = {"LEFT": "left", "RIGHT": "right", "FULL": "full"}.get(side, "inner")
            node = Join(join_kind, node, source.node, conjunction(parts))
        return node, scope

    def _lower_relation(self, relation: exp.Expression, env: Env) -> Source:
        if isinstance(relation, exp.Subquery):
            node, names = self.lower_query(relation.this, env)
            self._refuse_limit(relation)
            return self._closed_source(relation.alias_or_name or "_subquery", node, names, relation)
        if not isinstance(relation, exp.Table) or not isinstance(relation.this, exp.Identifier):
            raise NotIncrementalizable(
                "relation", expr(relation), "only tables, views, CTEs and subqueries can be read"
            )
        if relation.args.get("version") or relation.args.get("when"):
            raise NotIncrementalizable(
                "time travel", expr(relation), "a fixed table version never changes; read the table"
            )
        _refuse_unknown_clauses(relation, TABLE_CLAUSES)
        key = table_name(relation)
        alias = relation.alias_or_name
        if not relation.db and key in env.ctes:
            definition, cte_env, aliases = env.ctes[key]
            node, names = self.lower_query(definition, cte_env)
            return self._closed_source(alias, node, aliases or names, relation)
        table_alias = relation.args.get("alias")
        if table_alias is not None and table_alias.columns:
            raise NotIncrementalizable(
                "relation", expr(relation), "column aliases on a base table are not supported"
            )
        scan = Scan(key, unique_keys=self.unique_keys.get(key, []))
        return Source(alias, scan, scan=scan, schema=self.schema.get(key))

    def _closed_source(self, alias: str, node: Node, names: List[str], relation: exp.Expression) -> Source:
        table_alias = relation.args.get("alias")
        if table_alias is not None and table_alias.columns:
            renamed = [c.name for c in table_alias.columns]
            if len(renamed) != len(names):
                raise NotIncrementalizable(
                    "relation", expr(relation), "column alias list does not match the columns"
                )
            names = renamed
        if len(names) != len(node.columns):
            raise NotIncrementalizable(
                "relation", expr(relation), "column alias list does not match the columns"
            )
        known: Dict[str, str] = {}
        for name, internal in zip(names, node.columns):
            known.setdefault(name.lower(), internal)
        return Source(alias, node, known=known, order=list(names))

    # -- WHERE: filters and subquery predicates (semi/anti joins) --------------------------------

    def _lower_where(
        self,
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
            if self._subquery_predicate(part) is not None:
                subqueries.append(part)
                continue
            translated = self.translate(part, scope)
            if is_local is not None and not all(is_local(c.name) for c in translated.find_all(exp.Column)):
                correlated.append(translated)
            else:
                plain.append(translated)
        condition = conjunction(plain)
        if condition is not None:
            node = Filter(node, condition)
        for part in subqueries:
            node = self._lower_subquery_predicate(node, scope, part, env)
        return node, correlated

    @staticmethod
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

    def _lower_subquery_predicate(self, node: Node, scope: Scope, part: exp.Expression, env: Env) -> Node:
        found = self._subquery_predicate(part)
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
        right, theta, value = self._lower_predicate_subquery(query, scope, env, lhs is not None, part)
        if lhs is not None:
            assert value is not None
            left_value = self.translate(lhs, scope)
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
        self,
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
            and not any(self._contains_aggregate(i) or i.find(exp.Window) for i in query.expressions)
        )
        if simple:
            assert isinstance(query, exp.Select)
            self._refuse_limit(query)
            node, inner_scope = self._lower_from(query, env, scope)
            local = node
            node, correlated = self._lower_where(
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
                value = self.translate(query.expressions[0].unalias(), inner_scope)
            return node, correlated, value
        self._refuse_correlation(query, scope, part)
        node, names = self.lower_query(query, env)
        value = None
        if wants_value:
            if len(names) != 1:
                raise NotIncrementalizable("in", expr(part), "IN (subquery) must select one column")
            value = column(node.columns[0])
        return node, [], value

    @staticmethod
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

    # -- GROUP BY / aggregates -------------------------------------------------------------------

    def _contains_aggregate(self, expression: exp.Expression) -> bool:
        def visit(node: exp.Expression) -> bool:
            if isinstance(node, (exp.Window, exp.Subquery, exp.Select)):
                return False
            if is_aggregate(node):
                return True
            return any(visit(child) for child in node.iter_expressions())

        return visit(expression)

    def _with_aliases(
        self, expression: exp.Expression, aliases: Dict[str, exp.Expression], scope: Scope
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

    def _lower_aggregate(
        self,
        node: Node,
        scope: Scope,
        items: List[exp.Expression],
        group: Optional[exp.Group],
        aliases: Dict[str, exp.Expression],
    ) -> Tuple[Node, Callable[[exp.Expression], exp.Expression]]:
        """The Aggregate over ``node``, and how to rewrite a select item over its output (group
        keys and aggregates become its columns; the aggregates are collected as they are met)."""
        keys = self._group_keys(scope, items, group, aliases)
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
                    name = self.names.mint(expression.key)
                    aggregates.append((name, expression))
                    aggregate_by_sql[text] = name
                return column(aggregate_by_sql[text])
            if isinstance(expression, exp.Column):
                raise NotIncrementalizable(
                    "aggregate", text, "column is neither grouped nor inside an aggregate"
                )
            for child in list(expression.iter_expressions()):
                _replace(child, substitute(child))
            return expression

        return Aggregate(node, keys, aggregates), substitute

    def _group_keys(
        self,
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
                expression = self._with_aliases(expression, aliases, scope)
            translated = self.translate(expression, scope)
            if expr(translated) not in seen:
                seen.add(expr(translated))
                keys.append((self.names.mint(output_name(expression)), translated))
        return keys

    # -- windows ---------------------------------------------------------------------------------

    def _lower_windows(
        self, node: Node, expressions: List[exp.Expression]
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
                        "a window without PARTITION BY spans the whole input: any change "
                        "recomputes every row",
                    )
                function = window.this
                if not (
                    isinstance(function, RANKING_FUNCTIONS + ORDER_INDEPENDENT_AGGREGATES)
                    or (isinstance(function, exp.Anonymous) and is_aggregate(function))
                ):
                    raise NotIncrementalizable(
                        "window", expr(window), f"window function {function.key} is not supported"
                    )
                name = self.names.mint(function.key)
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


#: Clauses the planner understands (ORDER BY, SORT/CLUSTER/DISTRIBUTE BY and hints only arrange
#: rows and are dropped); anything else (QUALIFY, TABLESAMPLE, PIVOT, LATERAL VIEW, ...) is refused
#: rather than silently ignored.
SELECT_CLAUSES = frozenset(
    {
        "expressions",
        "from_",
        "joins",
        "where",
        "group",
        "having",
        "distinct",
        "with_",
        "hint",
        "order",
        "sort",
        "cluster",
        "distribute",
        "kind",
        "limit",
        "offset",
    }
)
TABLE_CLAUSES = frozenset({"this", "db", "catalog", "alias", "hints"})
JOIN_CLAUSES = frozenset({"this", "on", "using", "side", "kind", "method", "hint"})
UNION_CLAUSES = frozenset({"this", "expression", "distinct", "with_", "order", "limit", "offset"})


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


def _refuse_unknown_clauses(node: exp.Expression, understood: FrozenSet[str]) -> None:
    for clause, value in node.args.items():
        if clause not in understood and value not in (None, False, []):
            raise NotIncrementalizable(
                clause, expr(node)[:200], f"{clause} is not supported in a dynamic table's query"
            )


def _fields(base: exp.Expression, fields: List[str]) -> exp.Expression:
    """Struct field access ``base.f1.f2``."""
    for name in fields:
        base = exp.Dot(this=base, expression=exp.to_identifier(name, quoted=True))
    return base


def _replace(old: exp.Expression, new: exp.Expression) -> None:
    if new is not old:
        old.replace(new)


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
