"""Filter: Δσ(Q) = σ(ΔQ) (σ is linear on Z-sets).

Cost: that of ΔQ. An update that moves a row into or out of the filter arrives as a -1 of the old
row and a +1 of the new one, each kept or dropped on its own. A filter keeping the first row per
partition of a window whose first rows the DT stores is differentiated off them instead
(top_one.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from dbt.adapters.dyntable.differentiation.plan import Filter
from dbt.adapters.dyntable.differentiation.sqltext import expr, with_weight
from dbt.adapters.dyntable.vocabulary import WEIGHT
from dbt.adapters.dyntable.vocabulary import quote as q

if TYPE_CHECKING:
    from dbt.adapters.dyntable.differentiation.derivative import Differentiator

NODE = Filter
RULE = "Δσ(Q) = σ(ΔQ)"


def derive(node: Filter, d: "Differentiator") -> Optional[str]:
    child = d.derive(node.child)
    if child is None:
        return None
    return (
        f"SELECT {with_weight(node.columns, q(WEIGHT))} FROM ({child}) AS `_dyn_q` "
        f"WHERE {expr(node.condition)}"
    )
