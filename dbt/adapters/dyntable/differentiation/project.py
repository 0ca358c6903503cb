"""Projection: Δπ(Q) = π(ΔQ), weights unchanged (π is linear on Z-sets).

Cost: that of ΔQ. Expressions are deterministic (checked while planning), so re-evaluating them
on a deleted row reproduces the value stored for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from dbt.adapters.dyntable.differentiation.plan import Project
from dbt.adapters.dyntable.differentiation.sqltext import expr
from dbt.adapters.dyntable.vocabulary import WEIGHT
from dbt.adapters.dyntable.vocabulary import quote as q

if TYPE_CHECKING:
    from dbt.adapters.dyntable.differentiation.derivative import Differentiator

NODE = Project
RULE = "Δπ(Q) = π(ΔQ)"


def derive(node: Project, d: "Differentiator") -> Optional[str]:
    child = d.derive(node.child)
    if child is None:
        return None
    listed = ", ".join(f"{expr(e)} AS {q(n)}" for e, n in zip(node.expressions, node.names))
    return f"SELECT {listed}, {q(WEIGHT)} AS {q(WEIGHT)} FROM ({child}) AS `_dyn_q`"
