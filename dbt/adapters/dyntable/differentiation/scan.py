"""Scan: Δ(T) = the changes of T over the interval, as the resolver reads them.

Cost: one read of the table's changes (never the table itself); nothing when the table did not
change, which prunes every delta branch above it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from dbt.adapters.dyntable.differentiation.plan import Scan
from dbt.adapters.dyntable.differentiation.render import scan_select
from dbt.adapters.dyntable.vocabulary import WEIGHT
from dbt.adapters.dyntable.vocabulary import quote as q

if TYPE_CHECKING:
    from dbt.adapters.dyntable.differentiation.derivative import Differentiator

NODE = Scan
RULE = "ΔT = changes(T)"


def derive(node: Scan, d: "Differentiator") -> Optional[str]:
    if d.resolver.is_unchanged(node.table):
        return None
    weight = f", CAST({q(WEIGHT)} AS BIGINT) AS {q(WEIGHT)}"
    return scan_select(node, f"({d.changes(node.table)})", weight)
