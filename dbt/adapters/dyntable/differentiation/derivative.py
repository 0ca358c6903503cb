"""Differentiation: push Δ from the root of a plan down to the scans, one rule per operator.

Deltas are Z-sets: a relation with the node's columns plus ``_dyn_weight`` (+n: n copies
inserted, -n: n copies deleted). Inner deltas may be unconsolidated (a row can appear with +1 and
-1); every rule is exact on such input, and the final delta is consolidated to at most one row per
distinct output tuple with a non-zero weight, so ``state(v0) ⊎ Δ = Q(v1)`` as multisets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from sqlglot import exp

from dbt.adapters.dyntable.differentiation import (
    aggregate,
    distinct,
    join,
    outer_join,
    project,
    pruning,
    scan,
    semi_join,
    top_one,
    union,
    window,
)
from dbt.adapters.dyntable.differentiation import (
    filter as filter_rule,
)
from dbt.adapters.dyntable.differentiation.plan import (
    Aggregate,
    Filter,
    Node,
    Plan,
    Project,
    Scan,
    is_monotone_node,
)
from dbt.adapters.dyntable.differentiation.pruning import Within
from dbt.adapters.dyntable.differentiation.render import rename, render
from dbt.adapters.dyntable.differentiation.resolver import SourceResolver
from dbt.adapters.dyntable.differentiation.sqltext import expr
from dbt.adapters.dyntable.vocabulary import WEIGHT, consolidate
from dbt.adapters.dyntable.vocabulary import quote as q

#: The rules, tried in this order: the first whose node type matches and that ``applies`` (where
#: it says) differentiates a node (docs/ARCHITECTURE.md, "Adding a differentiation rule").
RULES: Tuple[ModuleType, ...] = (
    scan,
    project,
    top_one,
    filter_rule,
    join,
    outer_join,
    semi_join,
    union,
    aggregate,
    distinct,
    window,
)
#: Said of a node no rule differentiated: an unchanged input, or one its parent's rule read.
UNCHANGED = "unchanged: Δ = ∅"
READ_BY_PARENT = "read by the rule above, not differentiated"


def rule_for(node: Node, d: Optional["Differentiator"] = None) -> Optional[ModuleType]:
    """The rule that differentiates ``node`` with ``d`` (None: the node never changes)."""
    for rule in RULES:
        applies = getattr(rule, "applies", None)
        if isinstance(node, rule.NODE) and (applies is None or applies(node, d)):
            return rule
    return None


@dataclass(frozen=True)
class DeltaQuery:
    """The consolidated delta of a plan over the resolver's interval.

    ``sql`` returns ``columns`` plus ``_dyn_weight`` (BIGINT, never 0), at most one row per
    distinct tuple (NULLs equal). ``insert_only`` is true when every weight is positive (all
    sources only gained rows and the plan is monotone), so the delta can be appended.
    ``row_key`` is the plan's row key, by which -1/+1 pairs become updates.
    """

    sql: str
    columns: List[str]
    row_key: Optional[List[str]]
    insert_only: bool
    #: The formula that differentiated each node of the plan, by ``id(node)``: what ``explain``
    #: prints beside the plan, so it shows the rules this delta was made with.
    applied: Mapping[int, str] = field(default_factory=dict, compare=False)
    #: The same change as partials to fold into the DT's stored groups, when it can be applied so
    #: (inserts under a stored GROUP BY of count, sum, min and max; ``aggregate.py``).
    accumulation: Optional[aggregate.Accumulation] = field(default=None, compare=False)


class Differentiator:
    """Derivatives and versioned renderings of one plan's nodes, for one resolver.

    Each derivative and each rendering of a non-scan node becomes a named CTE, referenced as
    often as rules need it: the SQL grows linearly with the plan, although rules such as the
    aggregate's read ΔQ twice (inlining would double the text at every level).
    """

    def __init__(
        self, resolver: SourceResolver, stored: Optional[Tuple[Node, str]] = None, checked_fold: bool = False
    ) -> None:
        self.resolver = resolver
        self.stored = stored
        #: Whether a rule may fold a change into the stored rows under a check the engine makes,
        #: whose failure leaves the DT to be recomputed (AUTO's): ``aggregate.fold_checked``.
        self.checked_fold = checked_fold
        self.ctes: List[Tuple[str, str]] = []
        self._derived: Dict[int, Optional[str]] = {}
        self.applied: Dict[int, str] = {}
        self._rendered: Dict[Tuple[object, ...], str] = {}

    def changes(self, table: str) -> str:
        """The resolver's changes of ``table``, read once however many scans of it the plan has."""
        key = (table, "changes")
        if key not in self._rendered:
            self._rendered[key] = self._share("c", f"SELECT * FROM {self.resolver.changes(table)}")
        return self._rendered[key]

    def share(self, sql: str) -> str:
        """A relation a rule reads more than once, computed once as a CTE."""
        return self._share("x", sql)

    def _share(self, kind: str, sql: str) -> str:
        name = f"_dyn_{kind}{len(self.ctes)}"
        self.ctes.append((name, sql))
        return f"SELECT * FROM {q(name)}"

    def _version(self, node: Node, version: str, bound: Optional[Tuple[str, Within]] = None) -> str:
        key = (id(node), version, bound)
        if key not in self._rendered:
            read = self.resolver.before if version == "v0_" else self.resolver.after

            def relation(table: str) -> str:
                return read(table, bound[1]) if bound is not None and table == bound[0] else read(table)

            def sub(child: Node) -> str:
                below = bound if bound is not None and bound[0] in child.sources() else None
                return self._version(child, version, below)

            sql = render(node, relation, sub)
            self._rendered[key] = sql if isinstance(node, Scan) else self._share(version, sql)
        return self._rendered[key]

    def before(self, node: Node, keys: Sequence[exp.Expression] = ()) -> str:
        """``node`` evaluated on its sources at the start of the interval (Q|I0); with ``keys``,
        at least its rows whose keys the change may touch (``pruning.py``)."""
        return self._version(node, "v0_", pruning.within(self, node, keys) if keys else None)

    def after(self, node: Node, keys: Sequence[exp.Expression] = ()) -> str:
        """``node`` evaluated on its sources at the end of the interval (Q|I1), or at least its
        rows whose ``keys`` the change may touch."""
        return self._version(node, "v1_", pruning.within(self, node, keys) if keys else None)

    def stored_rows(self, node: Node) -> Optional[str]:
        """The DT's stored rows, with ``node``'s column names, when ``node`` is the plan's root and
        the caller passed the DT (its contents are Q|I0, so rules may read them instead of Q)."""
        if self.stored is None or self.stored[0] is not node:
            return None
        return self.stored[1]

    def unchanged(self, node: Node) -> bool:
        return all(self.resolver.is_unchanged(t) for t in node.sources())

    def positive(self, node: Node) -> bool:
        """Whether ``node``'s delta only inserts: its sources only gained rows and every operator
        below it is monotone."""
        return all(self.resolver.is_insert_only(t) for t in node.sources()) and all(
            is_monotone_node(n) for n in node.walk()
        )

    def derive(self, node: Node) -> Optional[str]:
        """ΔQ for ``node`` as a SELECT of its columns and ``_dyn_weight``; None if it is empty."""
        if id(node) not in self._derived:
            rule = rule_for(node, self)
            if rule is None or self.unchanged(node):
                self.applied[id(node)] = UNCHANGED
                delta = None
            else:
                self.applied[id(node)] = rule.RULE
                delta = rule.derive(node, self)
            self._derived[id(node)] = None if delta is None else self._share("d", delta)
        return self._derived[id(node)]

    def note(self, node: Node, formula: str) -> None:
        """Say which variant of its rule differentiated ``node`` (e.g. folding into the DT)."""
        self.applied[id(node)] = formula

    def with_ctes(self, sql: str) -> str:
        """``sql`` with the CTEs it reads, directly or through other CTEs (a CTE reads only those
        before it), so an engine never analyses one that is not read."""
        read, text = [], sql
        for name, body in reversed(self.ctes):
            if q(name) in text:
                read.append((name, body))
                text += body
        if not read:
            return sql
        named = ",\n".join(f"{q(name)} AS ({body})" for name, body in reversed(read))
        return f"WITH {named}\n{sql}"


def _renamed_root(plan: Plan) -> Tuple[Node, Dict[str, str]]:
    """The node below the projections at the root that only rename columns, and the output
    column each of its columns becomes."""
    node, names = plan.root, dict(zip(plan.root.columns, plan.columns))
    while isinstance(node, Project) and node.is_rename():
        names = {child: names[n] for n, child in node.renamed().items()}  # type: ignore[union-attr]
        node = node.child
    return node, names


def _stored_node(plan: Plan, stored: str) -> Tuple[Node, str]:
    """The node whose rows the DT stores, and a SELECT of them under that node's column names:
    the root, or below the projections that only rename the columns of the node beneath them, or
    below one that drops only a column a filter beneath pins to a constant (``rn = 1``): every
    stored row had that value."""
    node, output = _renamed_root(plan)
    names = {c: q(n) for c, n in output.items()}
    if isinstance(node, Project) and isinstance(node.child, Filter):
        renamed, pinned = node.renamed(), node.child.pinned()
        if (
            renamed is not None
            and pinned is not None
            and sorted(list(renamed.values()) + [pinned[0]]) == sorted(node.child.columns)
        ):
            names = {child: names[n] for n, child in renamed.items()}
            names[pinned[0]] = expr(pinned[1])
            node = node.child
    listed = ", ".join(f"{names[c]} AS {q(c)}" for c in node.columns)
    return node, f"SELECT {listed} FROM {stored}"


def differentiate(
    plan: Plan,
    resolver: SourceResolver,
    stored: Optional[str] = None,
    checked_fold: bool = False,
    types: Optional[Mapping[str, str]] = None,
) -> DeltaQuery:
    """The consolidated delta of ``plan`` between the resolver's two versions of its sources.

    ``stored`` names the relation holding the query's result at the interval's start (the DT
    itself); rules that can fold changes into it (the aggregate's, for inserts) read it instead
    of recomputing from the sources. With ``checked_fold``, they fold deletes too where a check
    in the query can tell them apart from what the stored rows cannot (``aggregate.py``): for
    a refresh that recomputes the DT when the check fails. ``types`` (SQL types by lower-case
    column name: the DT's) casts the columns it names before the final consolidation, so the
    delta holds at most one row per tuple as the DT stores it.
    """
    root = plan.root
    differentiator = Differentiator(
        resolver, None if stored is None else _stored_node(plan, stored), checked_fold
    )
    delta = differentiator.derive(root)
    renamed = rename(root.columns, plan.columns, types)
    if delta is None:
        # Typed, empty: the columns' types are the query's (the DT's, where ``types`` gives them).
        sql = (
            f"SELECT {renamed}, CAST(0 AS BIGINT) AS {q(WEIGHT)} "
            f"FROM ({differentiator.after(root)}) AS `_dyn_q` WHERE FALSE"
        )
        return DeltaQuery(
            differentiator.with_ctes(sql), list(plan.columns), plan.row_key, True, differentiator.applied
        )
    positive = differentiator.positive(root)
    outer = f"SELECT {renamed}, {q(WEIGHT)} AS {q(WEIGHT)} FROM ({delta}) AS `_dyn_q`"
    grouped, names = _renamed_root(plan)
    return DeltaQuery(
        differentiator.with_ctes(consolidate(outer, plan.columns, positive=positive)),
        list(plan.columns),
        plan.row_key,
        positive,
        differentiator.applied,
        aggregate.accumulation(grouped, differentiator, names) if isinstance(grouped, Aggregate) else None,
    )
