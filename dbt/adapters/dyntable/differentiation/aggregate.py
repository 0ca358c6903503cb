"""GROUP BY: recompute the groups ΔQ touches (seed 001 §3.2.1)::

    Δγ_k(Q) = -γ_k(Q|I0 ⋉_k ΔQ) + γ_k(Q|I1 ⋉_k ΔQ)

The semi-join on the group keys is NULL-safe (``<=>``), as GROUP BY puts NULL keys in one group.
The two recomputations are consolidated here, so a touched group whose aggregates did not change
contributes nothing and an updated group becomes one -1 and one +1 row (the materialization turns
that pair into an update by ``plan.row_key``, the group keys). Any order-independent aggregate
works (count, count(distinct), sum, avg, min, max, bool_and/or, stddev, ...), since the group is
recomputed from its rows.

A global aggregate (no GROUP BY) has exactly one row at every version, even over empty input
(count 0, sum NULL), so its derivative is ``-γ(Q|I0) + γ(Q|I1)`` whenever Q changed.

Cost: Q read twice, restricted to the touched groups; cheaper than recomputation when few groups
change, dearer when most do (seed 001 notes the ambiguity; a cost-based choice of FULL refresh is
the materialization's). Invertible aggregates (count, sum, avg) could instead be updated from the
DT's stored state: not done here, the recomputation is exact for every aggregate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from dbt.adapters.dyntable.differentiation.plan import Aggregate
from dbt.adapters.dyntable.differentiation.render import aggregate_select
from dbt.adapters.dyntable.differentiation.sqltext import cols, consolidate, expr, q, signed, union_all

if TYPE_CHECKING:
    from dbt.adapters.dyntable.differentiation.derivative import Differentiator

RULE = "Δγk(Q) = -γk(Q|I0 ⋉k ΔQ) + γk(Q|I1 ⋉k ΔQ)"


def touched_rows(d: "Differentiator", relation: str, child_columns, keys, delta: str) -> str:
    """Rows of ``relation`` whose values of the ``keys`` expressions occur in ``delta``."""
    key_names = [f"_dyn_k{i}" for i in range(len(keys))]
    distinct_keys = ", ".join(f"{expr(e)} AS {q(n)}" for e, n in zip(keys, key_names))
    match = " AND ".join(f"{expr(e)} <=> `_dyn_k`.{q(n)}" for e, n in zip(keys, key_names))
    return (
        f"SELECT {cols(child_columns)} FROM ({relation}) AS `_dyn_q` LEFT SEMI JOIN "
        f"(SELECT DISTINCT {distinct_keys} FROM ({delta}) AS `_dyn_d`) AS `_dyn_k` ON {match}"
    )


def derive(node: Aggregate, d: "Differentiator") -> Optional[str]:
    delta = d.derive(node.child)
    if delta is None:
        return None
    before, after = d.before(node.child), d.after(node.child)
    if node.keys:
        keys = [e for _, e in node.keys]
        before = touched_rows(d, before, node.child.columns, keys, delta)
        after = touched_rows(d, after, node.child.columns, keys, delta)
    old = signed(aggregate_select(node, before), node.columns, -1)
    new = signed(aggregate_select(node, after), node.columns, 1)
    combined = union_all([old, new])
    assert combined is not None
    return consolidate(combined, node.columns)
