"""Union all: Δ(Q + R) = ΔQ + ΔR, branch columns renamed by position.

Cost: the sum of the branches' deltas; unchanged branches are pruned. UNION (distinct) is planned
as DISTINCT over UNION ALL, so its deduplication is the distinct rule's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional

from dbt.adapters.dyntable.differentiation.plan import UnionAll
from dbt.adapters.dyntable.differentiation.render import rename
from dbt.adapters.dyntable.differentiation.sqltext import union_all
from dbt.adapters.dyntable.vocabulary import WEIGHT
from dbt.adapters.dyntable.vocabulary import quote as q

if TYPE_CHECKING:
    from dbt.adapters.dyntable.differentiation.derivative import Differentiator

NODE = UnionAll
RULE = "Δ(Q+R) = ΔQ + ΔR"


def derive(node: UnionAll, d: "Differentiator") -> Optional[str]:
    terms: List[str] = []
    for i, child in enumerate(node.inputs):
        delta = d.derive(child)
        if delta is not None:
            terms.append(
                f"SELECT {rename(child.columns, node.names)}, {q(WEIGHT)} AS {q(WEIGHT)} "
                f"FROM ({delta}) AS `_dyn_b{i}`"
            )
    return union_all(terms)
