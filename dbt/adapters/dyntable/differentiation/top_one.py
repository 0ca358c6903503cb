"""The first row per partition, read off the DT's stored first rows (docs/ARCHITECTURE.md, "Deriving")::

    Q' = σ_{rn = 1}(ξp(Q))    rn = row_number() OVER (PARTITION BY p ORDER BY o)

    ΔQ' = -(DT ⋉p ΔQ) + σ_{rn = 1}(ξp((DT ⋉p ΔQ) ⊎ ΔQ))    when ΔQ only inserts
    ΔQ' = -(DT ⋉p ΔQ) + σ_{rn = 1}(ξp(Q|I1 ⋉p ΔQ))          otherwise

When Q only gains rows, a partition's new first row is the first of its old first row (the one
the DT stores) and its inserted rows. Otherwise the first row can leave and the DT does not hold
the runner-up, so the touched partitions are recomputed at I1; their old first rows are still the
DT's (the window rule followed by the filter would recompute them at I0 as well).

Cost beyond ΔQ: the DT's rows of the touched partitions; for inserts nothing else (Q is never
read), otherwise Q read once (at I1), restricted to the touched partitions.

rank/dense_rank (ties keep several rows), and DTs that do not store these first rows, use the
window rule and the filter. The DT may store the first rows without ``rn`` (``select * except rn``
style queries); ``rn`` is the constant 1 there, which is how the stored rows reach this node.
Like the window rule, exact when ORDER BY breaks ties repeatably.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from dbt.adapters.dyntable.differentiation.aggregate import touched_keys, touched_rows
from dbt.adapters.dyntable.differentiation.plan import Filter
from dbt.adapters.dyntable.differentiation.render import rename, window_select
from dbt.adapters.dyntable.differentiation.sqltext import cols, signed, union_all
from dbt.adapters.dyntable.vocabulary import WEIGHT, consolidate
from dbt.adapters.dyntable.vocabulary import quote as q

if TYPE_CHECKING:
    from dbt.adapters.dyntable.differentiation.derivative import Differentiator

NODE = Filter
RULE = "Δσrn=1(ξp(Q)) = -(DT ⋉p ΔQ) + σrn=1(ξp(Q|I1 ⋉p ΔQ))"
#: The variant where ΔQ only inserts: Q is never read, the DT's touched first rows and ΔQ are
#: sorted (``estimate`` prices it so).
INSERTS_RULE = "Δσrn=1(ξp(Q)) = -(DT ⋉p ΔQ) + σrn=1(ξp((DT ⋉p ΔQ) ⊎ ΔQ)) (ΔQ inserts only)"


def applies(node: Filter, d: Optional["Differentiator"]) -> bool:
    """Whether ``node`` keeps the first row per partition of a window whose first rows the DT
    stores (otherwise the filter and window rules differentiate it)."""
    return d is not None and node.first_row_window() is not None and d.stored_rows(node) is not None


def derive(node: Filter, d: "Differentiator") -> Optional[str]:
    """The delta read off the DT's first rows, in the window's columns the filter passes on
    (those its PARTITION BY and ORDER BY read among them)."""
    matched, stored = node.first_row_window(), d.stored_rows(node)
    assert matched is not None and stored is not None
    window, names = matched
    delta = d.derive(window.child)
    if delta is None:
        return None
    kept = [c for c in window.columns if c in names]
    inputs = [c for c in window.child.columns if c in names]
    partition = window.partition_by
    touched = touched_keys(d, partition, delta)
    stored_first = f"SELECT {rename([names[c] for c in kept], kept)} FROM ({stored}) AS `_dyn_s`"
    old = touched_rows(stored_first, kept, partition, touched)
    if d.positive(window.child):
        d.note(node, INSERTS_RULE)
        old = d.share(old)
        # Copies of an inserted row are interchangeable here: row_number keeps one of them.
        candidates = union_all(
            [
                f"SELECT {cols(inputs)} FROM ({old}) AS `_dyn_o`",
                f"SELECT {cols(inputs)} FROM ({delta}) AS `_dyn_d`",
            ]
        )
        assert candidates is not None
    else:
        candidates = touched_rows(d.after(window.child, partition), inputs, partition, touched)
    function_name = window.functions[0][0]
    ranked = window_select(window, candidates, inputs)
    new = f"SELECT * FROM ({ranked}) AS `_dyn_w` WHERE {q(function_name)} = 1"
    terms = union_all([signed(old, kept, -1), signed(new, kept, 1)])
    assert terms is not None
    listed = rename(kept + [WEIGHT], [names[c] for c in kept] + [WEIGHT])
    return consolidate(f"SELECT {listed} FROM ({terms}) AS `_dyn_t`", node.columns)
