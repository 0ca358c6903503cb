"""Window functions with PARTITION BY: recompute the partitions ΔQ touches (docs/ARCHITECTURE.md,
"Deriving")::

    Δξ_p(Q) = -ξ_p(Q|I0 ⋉_p ΔQ) + ξ_p(Q|I1 ⋉_p ΔQ)

A window function only sees its own partition, so rows outside the touched partitions keep their
values. The semi-join on the partition expressions is NULL-safe (NULLs form one partition). The two
sides are consolidated here: rows of a touched partition whose window value did not change
cancel. Exact for every window function whose result is determined by the partition's rows
(ties in ORDER BY must be broken repeatably for row_number, lag/lead, first/last).

When the DT stores this node's rows (``Differentiator.stored_rows``: they are ξp(Q|I0)), the old
side is read from the DT instead of recomputed::

    Δξ_p(Q) = -(DT ⋉_p ΔQ) + ξ_p(Q|I1 ⋉_p ΔQ)

The partition expressions are over the window's input columns, which the window passes through
under the same names, so they evaluate on the stored rows as they do on Q. The deleted rows are
the DT's own: an old window value a recomputation would round differently is still removed exactly.

Cost beyond ΔQ: Q read twice (at I0 and I1), restricted to the touched partitions; with the DT's
rows, Q read once (at I1) and the DT's rows of the touched partitions.

The top-1-per-partition pattern (``row_number() ... = 1`` in a subquery) is this rule followed by
the linear filter rule, except where the DT stores the first rows (top_one.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from dbt.adapters.dyntable.differentiation.aggregate import touched_keys, touched_rows
from dbt.adapters.dyntable.differentiation.plan import Window
from dbt.adapters.dyntable.differentiation.render import window_select
from dbt.adapters.dyntable.differentiation.sqltext import signed, union_all
from dbt.adapters.dyntable.vocabulary import consolidate

if TYPE_CHECKING:
    from dbt.adapters.dyntable.differentiation.derivative import Differentiator

NODE = Window
RULE = "Δξp(Q) = -ξp(Q|I0 ⋉p ΔQ) + ξp(Q|I1 ⋉p ΔQ)"
#: When the DT stores this node's rows: its touched partitions are the old side.
STORED_RULE = "Δξp(Q) = -(DT ⋉p ΔQ) + ξp(Q|I1 ⋉p ΔQ)"


def derive(node: Window, d: "Differentiator") -> Optional[str]:
    delta = d.derive(node.child)
    if delta is None:
        return None
    partition = node.partition_by
    touched = touched_keys(d, partition, delta)
    stored = d.stored_rows(node)
    if stored is not None:
        d.note(node, STORED_RULE)
        old = touched_rows(stored, node.columns, partition, touched)
    else:
        old = window_select(
            node, touched_rows(d.before(node.child, partition), node.child.columns, partition, touched)
        )
    new = window_select(
        node, touched_rows(d.after(node.child, partition), node.child.columns, partition, touched)
    )
    combined = union_all([signed(old, node.columns, -1), signed(new, node.columns, 1)])
    assert combined is not None
    return consolidate(combined, node.columns)
