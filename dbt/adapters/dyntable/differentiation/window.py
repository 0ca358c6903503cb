"""Window functions with PARTITION BY: recompute the partitions ΔQ touches (seed 000 §5.5.1)::

    Δξ_p(Q) = -ξ_p(Q|I0 ⋉_p ΔQ) + ξ_p(Q|I1 ⋉_p ΔQ)

A window function only sees its own partition, so rows outside the touched partitions keep their
values. The semi-join on the partition expressions is NULL-safe (NULLs form one partition). The two
recomputations are consolidated here: rows of a touched partition whose window value did not
change cancel. Exact for every window function whose result is determined by the partition's rows
(ties in ORDER BY must be broken repeatably for row_number, lag/lead, first/last).
Cost: Q read twice, restricted to the touched partitions. The top-1-per-partition pattern
(``row_number() ... = 1`` in a subquery) is this rule followed by the linear filter rule, except
that inserts fold into the DT's stored first rows (top_one.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from dbt.adapters.dyntable.differentiation.aggregate import touched_keys, touched_rows
from dbt.adapters.dyntable.differentiation.plan import Window
from dbt.adapters.dyntable.differentiation.render import window_select
from dbt.adapters.dyntable.differentiation.sqltext import consolidate, signed, union_all

if TYPE_CHECKING:
    from dbt.adapters.dyntable.differentiation.derivative import Differentiator

RULE = "Δξp(Q) = -ξp(Q|I0 ⋉p ΔQ) + ξp(Q|I1 ⋉p ΔQ)"


def derive(node: Window, d: "Differentiator") -> Optional[str]:
    delta = d.derive(node.child)
    if delta is None:
        return None
    partition = node.partition_by
    touched = touched_keys(d, partition, delta)
    before = touched_rows(d.before(node.child), node.child.columns, partition, touched)
    after = touched_rows(d.after(node.child), node.child.columns, partition, touched)
    old = signed(window_select(node, before), node.columns, -1)
    new = signed(window_select(node, after), node.columns, 1)
    combined = union_all([old, new])
    assert combined is not None
    return consolidate(combined, node.columns)
