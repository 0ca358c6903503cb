"""Left, right and full outer joins (seed 000 §5.5.1), factored so that a left or right join
reads each input version at most twice beyond its changes (a full join: three times).

An outer join is the inner join plus the null-padded anti-join of each preserved side:
``L ⟕ R = L ⋈ R + pad(L ▷ R)``. The anti-join part changes in two ways: rows of ΔL find (or not) a
partner in R|I1, and rows of L|I0 gain or lose their last partner because of ΔR. The latter can
only be rows matching some row of ΔR, ``A = L|I0 ⋉ ΔR``, so for the left join::

    Δ(L ⟕ R) = ΔL ⟕ R|I1                 -- ΔL ⋈ R|I1 and pad(ΔL ▷ R|I1) in one outer join
             + L|I0 ⋈ ΔR
             + pad(A ▷ R|I1) - pad(A ▷ R|I0)

The right join is the mirror image (using Δ(L⋈R) = L|I1⋈ΔR + ΔL⋈R|I0), and the full join adds
the right side's ``pad(ΔR ▷ L|I1) + pad(B ▷ L|I1) - pad(B ▷ L|I0)`` with ``B = R|I0 ⋉ ΔL``.
Padding uses a left join against the other side tagged with a marker column, so the NULLs carry
the other side's column types. Insert-only specialisation: when ΔR only inserts, every row of A
has a partner in R|I1, so ``A ▷ R|I1`` is empty and that branch is skipped. Any join condition
works; equi-joins let the engine hash the semi-join that finds A.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional

from dbt.adapters.dyntable.differentiation.plan import Join, Node
from dbt.adapters.dyntable.differentiation.sqltext import WEIGHT, cols, expr, q, union_all, with_weight

if TYPE_CHECKING:
    from dbt.adapters.dyntable.differentiation.derivative import Differentiator

RULE = "Δ(L⟕R) = ΔL⟕R|I1 + L|I0⋈ΔR + pad(A▷R|I1) - pad(A▷R|I0), A = L|I0⋉ΔR"

DELTA_WEIGHT = f"`_dyn_p`.{q(WEIGHT)}"
PLUS, MINUS = "CAST(1 AS BIGINT)", "CAST(-1 AS BIGINT)"


def _condition(node: Join) -> str:
    return expr(node.condition) if node.condition is not None else "TRUE"


def _outer(node: Join, preserved: str, other: str, weight: str) -> str:
    return (
        f"SELECT {with_weight(node.columns, weight)} FROM ({preserved}) AS `_dyn_p` "
        f"LEFT JOIN ({other}) AS `_dyn_o` ON {_condition(node)}"
    )


def _inner(node: Join, one: str, other: str, weight: str) -> str:
    return (
        f"SELECT {with_weight(node.columns, weight)} FROM ({one}) AS `_dyn_p` "
        f"JOIN ({other}) AS `_dyn_o` ON {_condition(node)}"
    )


def _touched(node: Join, side: Node, side_rows: str, other_delta: str) -> str:
    """Rows of ``side_rows`` that match some row of ``other_delta``: those whose padding may flip."""
    return (
        f"SELECT {cols(side.columns)} FROM ({side_rows}) AS `_dyn_p` "
        f"LEFT SEMI JOIN ({other_delta}) AS `_dyn_o` ON {_condition(node)}"
    )


def _unmatched(node: Join, rows: str, other: str, weight: str) -> str:
    """Rows of ``rows`` with no partner in ``other``, padded with typed NULLs."""
    return (
        f"SELECT {with_weight(node.columns, weight)} FROM ({rows}) AS `_dyn_p` "
        f"LEFT JOIN (SELECT *, TRUE AS `_dyn_matched` FROM ({other}) AS `_dyn_m`) AS `_dyn_o` "
        f"ON {_condition(node)} WHERE `_dyn_o`.`_dyn_matched` IS NULL"
    )


def _padding_flips(
    node: Join, d: "Differentiator", side: Node, other: Node, other_delta: str
) -> List[str]:
    touched = d.share(_touched(node, side, d.before(side), other_delta))
    terms = []
    if not d.positive(other):
        terms.append(_unmatched(node, touched, d.after(other), PLUS))
    terms.append(_unmatched(node, touched, d.before(other), MINUS))
    return terms


def derive(node: Join, d: "Differentiator") -> Optional[str]:
    if node.kind == "left":
        preserved, other = node.left, node.right
    elif node.kind == "right":
        preserved, other = node.right, node.left
    else:
        return _derive_full(node, d)
    terms: List[str] = []
    preserved_delta = d.derive(preserved)
    if preserved_delta is not None:
        terms.append(_outer(node, preserved_delta, d.after(other), DELTA_WEIGHT))
    other_delta = d.derive(other)
    if other_delta is not None:
        terms.append(_inner(node, other_delta, d.before(preserved), DELTA_WEIGHT))
        terms.extend(_padding_flips(node, d, preserved, other, other_delta))
    return union_all(terms)


def _derive_full(node: Join, d: "Differentiator") -> Optional[str]:
    terms: List[str] = []
    left_delta = d.derive(node.left)
    right_delta = d.derive(node.right)
    if left_delta is not None:
        terms.append(_outer(node, left_delta, d.after(node.right), DELTA_WEIGHT))
    if right_delta is not None:
        terms.append(_inner(node, right_delta, d.before(node.left), DELTA_WEIGHT))
        terms.extend(_padding_flips(node, d, node.left, node.right, right_delta))
        terms.append(_unmatched(node, right_delta, d.after(node.left), DELTA_WEIGHT))
    if left_delta is not None:
        terms.extend(_padding_flips(node, d, node.right, node.left, left_delta))
    return union_all(terms)
