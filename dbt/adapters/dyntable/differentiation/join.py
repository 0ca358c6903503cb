"""Inner (and cross) join: Δ(Q ⋈ R) = ΔQ ⋈ R|I1 + Q|I0 ⋈ ΔR.

Seed 001 §3.2.1's two-term form: the ΔQ ⋈ ΔR term is folded into the first by reading R after
the interval. Each term carries the weight of its delta side. Cost: each input is read at most
once beyond its changes; a term whose delta side did not change is pruned. Any join condition
works (equi or not), since the rule never inspects it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional

from dbt.adapters.dyntable.differentiation.plan import Join
from dbt.adapters.dyntable.differentiation.render import join_select
from dbt.adapters.dyntable.differentiation.sqltext import union_all
from dbt.adapters.dyntable.vocabulary import WEIGHT
from dbt.adapters.dyntable.vocabulary import quote as q

if TYPE_CHECKING:
    from dbt.adapters.dyntable.differentiation.derivative import Differentiator

NODE = Join
RULE = "Δ(Q⋈R) = ΔQ⋈R|I1 + Q|I0⋈ΔR"


def applies(node: Join, d: Optional["Differentiator"]) -> bool:
    return node.kind == "inner"


def derive(node: Join, d: "Differentiator") -> Optional[str]:
    terms: List[str] = []
    left = d.derive(node.left)
    if left is not None:
        weight = f", `_dyn_l`.{q(WEIGHT)} AS {q(WEIGHT)}"
        terms.append(join_select(node, left, d.after(node.right), "inner", weight))
    right = d.derive(node.right)
    if right is not None:
        weight = f", `_dyn_r`.{q(WEIGHT)} AS {q(WEIGHT)}"
        terms.append(join_select(node, d.before(node.left), right, "inner", weight))
    return union_all(terms)
