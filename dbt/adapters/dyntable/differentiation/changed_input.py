"""The groups a change of a join's smaller input may touch, read off that input's change
(docs/ARCHITECTURE.md, "Deriving")::

    γk(Q) with Q = π/σ(L ⋈ R), L unchanged:   touched ⊆ π_kR(ΔR)

A GROUP BY recomputes the groups its input's change touches, found as the distinct keys of
ΔQ. Over an inner join where one input R changed and the other L did not, ΔQ = L ⋈ ΔR: finding
the touched keys that way reads L whole once more, beside the rescan of the touched groups. A
row of ΔQ carries, in each group key that is a column of R passed up unchanged (``kR``), the
value of a row of ΔR; so the groups whose ``kR`` values are among ΔR's hold every touched
group. Recomputing that superset is exact (a group whose rows did not change cancels against
its old row) and reads ΔR, never L a second time.

The superset may be wider than the touched groups where some group keys come from L (a dimension
row changed: every day of its site is recomputed, not only the days its fact rows fall on), so it
is taken where L is the larger input by bytes, where reading it once more costs most: a table
model or seed joined to a fact. Where the sizes are unknown, ΔQ's keys are read as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

from sqlglot import exp

from dbt.adapters.dyntable.differentiation.plan import Filter, Join, Node, Project
from dbt.adapters.dyntable.vocabulary import quote as q

if TYPE_CHECKING:
    from dbt.adapters.dyntable.differentiation.derivative import Differentiator


@dataclass(frozen=True)
class ChangedInputKeys:
    """Of a GROUP BY's keys, those (``positions``) read off its input's changed join input, and
    the distinct values of those keys in that input's change (``touched``, ``_dyn_k0``, ...)."""

    positions: Tuple[int, ...]
    touched: str

    def keys(self, keys: Sequence[exp.Expression]) -> List[exp.Expression]:
        return [keys[i] for i in self.positions]


def changed_input_keys(
    d: "Differentiator", child: Node, keys: Sequence[exp.Expression]
) -> Optional[ChangedInputKeys]:
    """The keys among ``keys`` (expressions over ``child``) that are columns of the one changed
    input of the inner join ``child`` projects and filters, with their touched values read off
    that input's change; None where ``child`` is not such a join or the other input is not the
    larger."""
    traced = [(i, _join_column(child, key)) for i, key in enumerate(keys)]
    joins = {id(found[0]) for _, found in traced if found is not None}
    if len(joins) != 1:
        return None
    join = next(found[0] for _, found in traced if found is not None)
    changed = [side for side in (join.left, join.right) if not d.unchanged(side)]
    if len(changed) != 1:
        return None
    side = changed[0]
    other = join.right if side is join.left else join.left
    if not _larger(d, other, side):
        return None
    columns = [(i, found[1]) for i, found in traced if found is not None and found[1] in side.columns]
    if not columns:
        return None
    delta = d.derive(side)
    if delta is None:
        return None
    distinct = ", ".join(f"{q(name)} AS {q(f'_dyn_k{j}')}" for j, (_, name) in enumerate(columns))
    touched = d.share(f"SELECT DISTINCT {distinct} FROM ({delta}) AS `_dyn_d`")
    return ChangedInputKeys(tuple(i for i, _ in columns), touched)


def _join_column(node: Node, expression: exp.Expression) -> Optional[Tuple[Join, str]]:
    """The inner join below ``node``, through projections and filters only, and its output
    column ``expression`` is, passed up unchanged; None otherwise."""
    if not (isinstance(expression, exp.Column) and not expression.table):
        return None
    name = expression.name
    while True:
        if isinstance(node, Project):
            if name not in node.names:
                return None
            passed = node.expressions[node.names.index(name)]
            if not (isinstance(passed, exp.Column) and not passed.table):
                return None
            node, name = node.child, passed.name
        elif isinstance(node, Filter):
            node = node.child
        elif isinstance(node, Join) and node.kind == "inner":
            return node, name
        else:
            return None


def _larger(d: "Differentiator", node: Node, than: Node) -> bool:
    """Whether ``node``'s sources weigh more bytes than ``than``'s; False where a size is unknown."""
    sizes = [[d.resolver.size_bytes(t) for t in sorted(n.sources())] for n in (node, than)]
    if any(size is None for side in sizes for size in side):
        return False
    return sum(s or 0 for s in sizes[0]) > sum(s or 0 for s in sizes[1])
