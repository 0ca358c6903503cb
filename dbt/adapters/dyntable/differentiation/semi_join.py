"""Semi-join and anti-join (IN / EXISTS / NOT EXISTS / NOT IN subqueries, LEFT SEMI/ANTI JOIN).

A row of L is kept by ``L ⋉ R`` while it has at least one partner in R. Its status can only flip
when a partner appears in or leaves ΔR, so with ``A = L|I0 ⋉ ΔR`` (rows of L|I0 matching a
changed row of R)::

    Δ(L ⋉ R) = ΔL ⋉ R|I1 + A ⋉ R|I1 - A ⋉ R|I0
    Δ(L ▷ R) = ΔL ▷ R|I1 + A ▷ R|I1 - A ▷ R|I0

Insert-only specialisation: when ΔR only inserts, ``A ⋉ R|I1 = A``, so the semi-join's R-side
term is ``A ▷ R|I0`` and the anti-join's is ``-(A ▷ R|I0)``: one read of R instead of two.
NOT IN arrives here as an anti-join whose condition is ``x = y OR x IS NULL OR y IS NULL``
(SQL's three-valued NOT IN), so NULLs on either side behave as Spark evaluates them.
Cost: L|I0 once and R at most twice beyond the changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional

from dbt.adapters.dyntable.differentiation.plan import SemiJoin
from dbt.adapters.dyntable.differentiation.sqltext import cols, expr, union_all, with_weight
from dbt.adapters.dyntable.vocabulary import WEIGHT
from dbt.adapters.dyntable.vocabulary import quote as q

if TYPE_CHECKING:
    from dbt.adapters.dyntable.differentiation.derivative import Differentiator

NODE = SemiJoin
RULE = "Δ(L⋉R) = ΔL⋉R|I1 + A⋉R|I1 - A⋉R|I0, A = L|I0⋉ΔR (▷ likewise)"

PLUS, MINUS = "CAST(1 AS BIGINT)", "CAST(-1 AS BIGINT)"


def _join(node: SemiJoin, rows: str, right: str, anti: bool, weight: str) -> str:
    kind = "LEFT ANTI JOIN" if anti else "LEFT SEMI JOIN"
    return (
        f"SELECT {with_weight(node.columns, weight)} FROM ({rows}) AS `_dyn_l` {kind} "
        f"({right}) AS `_dyn_r` ON {expr(node.condition)}"
    )


def derive(node: SemiJoin, d: "Differentiator") -> Optional[str]:
    terms: List[str] = []
    left_delta = d.derive(node.left)
    if left_delta is not None:
        terms.append(_join(node, left_delta, d.after(node.right), node.anti, f"`_dyn_l`.{q(WEIGHT)}"))
    right_delta = d.derive(node.right)
    if right_delta is not None:
        touched = d.share(
            f"SELECT {cols(node.columns)} FROM ({d.before(node.left)}) AS `_dyn_l` "
            f"LEFT SEMI JOIN ({right_delta}) AS `_dyn_r` ON {expr(node.condition)}"
        )
        if d.positive(node.right):
            terms.append(_join(node, touched, d.before(node.right), True, MINUS if node.anti else PLUS))
        else:
            terms.append(_join(node, touched, d.after(node.right), node.anti, PLUS))
            terms.append(_join(node, touched, d.before(node.right), node.anti, MINUS))
    return union_all(terms)
