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
the materialization's).

Updating invertible aggregates from the DT's stored state (a design, not built yet: the
recomputation above is exact for every aggregate, and correctness came first). For a root
``γ_k`` whose aggregates are all count(*), count(x), sum(x) and avg(x), the DT would store, per
group, hidden columns ``_dyn_n = count(*)`` and ``_dyn_nx = count(x)`` for each summed x (sum
is NULL when no x is non-NULL, which a stored sum alone cannot tell). The delta is then
``γ_k`` over ΔQ alone: ``dn = SUM(w)``, ``dnx = SUM(CASE WHEN x IS NOT NULL THEN w END)``,
``ds = SUM(x * w)``, and a MERGE on the keys sets ``n += dn``, ``nx += dnx``,
``s = CASE WHEN nx + dnx = 0 THEN NULL ELSE COALESCE(s, 0) + COALESCE(ds, 0) END``,
``avg = s / nx``, inserts new groups, and deletes groups whose ``n`` reaches 0 (except for a
global aggregate, which keeps its one row). That reads only ΔQ, never Q; it needs the resolver
to expose the DT itself, and the materialization to own the hidden columns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence

from sqlglot import exp

from dbt.adapters.dyntable.differentiation.plan import Aggregate
from dbt.adapters.dyntable.differentiation.render import aggregate_select
from dbt.adapters.dyntable.differentiation.sqltext import cols, consolidate, expr, q, signed, union_all

if TYPE_CHECKING:
    from dbt.adapters.dyntable.differentiation.derivative import Differentiator

RULE = "Δγk(Q) = -γk(Q|I0 ⋉k ΔQ) + γk(Q|I1 ⋉k ΔQ)"


def touched_keys(d: "Differentiator", keys: Sequence[exp.Expression], delta: str) -> str:
    """The distinct values of the ``keys`` expressions in ``delta``, as ``_dyn_k0, _dyn_k1...``;
    computed once, read for both versions."""
    distinct_keys = ", ".join(f"{expr(e)} AS {q(f'_dyn_k{i}')}" for i, e in enumerate(keys))
    return d.share(f"SELECT DISTINCT {distinct_keys} FROM ({delta}) AS `_dyn_d`")


def touched_rows(relation: str, columns: Sequence[str], keys: Sequence[exp.Expression], touched: str) -> str:
    """Rows of ``relation`` whose ``keys`` values are among ``touched`` (NULL-safe)."""
    match = " AND ".join(f"{expr(e)} <=> `_dyn_k`.{q(f'_dyn_k{i}')}" for i, e in enumerate(keys))
    return (
        f"SELECT {cols(columns)} FROM ({relation}) AS `_dyn_q` LEFT SEMI JOIN ({touched}) AS `_dyn_k` "
        f"ON {match}"
    )


def derive(node: Aggregate, d: "Differentiator") -> Optional[str]:
    delta = d.derive(node.child)
    if delta is None:
        return None
    before, after = d.before(node.child), d.after(node.child)
    if node.keys:
        keys = [e for _, e in node.keys]
        touched = touched_keys(d, keys, delta)
        before = touched_rows(before, node.child.columns, keys, touched)
        after = touched_rows(after, node.child.columns, keys, touched)
    old = signed(aggregate_select(node, before), node.columns, -1)
    new = signed(aggregate_select(node, after), node.columns, 1)
    combined = union_all([old, new])
    assert combined is not None
    return consolidate(combined, node.columns)
