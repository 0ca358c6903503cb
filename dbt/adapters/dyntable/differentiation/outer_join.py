"""Left, right and full outer joins, by counting partners instead of re-reading
an input at both ends of the interval.

An outer join is the inner join plus the null-padded anti-join of each preserved side:
``L ⟕ R = L ⋈ R + pad(L ▷ R)``. A row ``l`` of L|I0 can only gain or lose its padding when it
matches a row of ΔR. Those rows, as distinct tuples with their multiplicity ``m`` in L|I0, are
``A = γ(L|I0 ⋉ ΔR)``. With ``c0(l)`` and ``c1(l)`` the numbers of partners of ``l`` in R|I0 and
R|I1 (``c1 = c0 + Σ`` of the weights of its partners in ΔR)::

    Δ(L ⟕ R) = ΔL ⟕ R|I1                -- ΔL ⋈ R|I1 and pad(ΔL ▷ R|I1), in one outer join
             + A ⋈ ΔR                   -- L|I0 ⋈ ΔR, each pair weighted m·w
             + Σ_{l ∈ A} m(l)·([c1(l) = 0] - [c0(l) = 0])·pad(l)

c0 and c1 come from one grouped join of A with R|I0 (each row a partner at both ends) and ΔR
(each row a partner at the end, by its weight), so R|I0 is read once, and A, being distinct,
stands in for L|I0 in the inner part. Padding NULLs keep the other side's column types: they
come from a left join against that side's rows, or against an empty selection of its delta. Insert-only
specialisation: when ΔR only inserts, every row of A has a partner in R|I1, so the flips are
``-m·pad(A ▷ R|I0)``, an anti-join instead of the count.

The right join is the mirror image. The full join adds the right side's padding: the flips of
``B = γ(R|I0 ⋉ ΔL)`` and ``pad(ΔR ▷ L|I1)``, counted together over L|I0 and ΔL (the inner part
of ΔR is already in ``A ⋈ ΔR``). A row of ΔR that matches no row of ΔL keeps its partner count,
so only its weight matters: each distinct row ``r`` of B and ΔR carries ``n0`` (its
multiplicity in B) and ``n1`` (that plus its weight in ΔR), and contributes
``(n1·[c1(r) = 0] - n0·[c0(r) = 0])·pad(r)``.

Cost, when both sides changed, beyond the changes: a left join reads L|I0 once, R|I0 once and R|I1
once (a right join: the mirror); a full join reads L|I0 twice, R|I0 twice and R|I1 once (A and B are
shared relations, each read by two terms). Terms whose delta side did not change are pruned; without
ΔL, the full join's right padding is ``pad(ΔR ▷ L|I1)``, one read of L|I1. Any join condition works;
equi-joins let the engine hash every join here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional

from dbt.adapters.dyntable.differentiation.plan import Join, Node
from dbt.adapters.dyntable.differentiation.sqltext import cols, expr, union_all, with_weight
from dbt.adapters.dyntable.vocabulary import WEIGHT
from dbt.adapters.dyntable.vocabulary import quote as q

if TYPE_CHECKING:
    from dbt.adapters.dyntable.differentiation.derivative import Differentiator

NODE = Join
RULE = (
    "Δ(L⟕R) = ΔL⟕R|I1 + A⋈ΔR + m·([c1=0]-[c0=0])·pad(A), A = L|I0⋉ΔR with multiplicities m, "
    "c0/c1 its partners in R|I0/R|I1; ⟖ mirrored, ⟗ both sides"
)

DELTA_WEIGHT = f"`_dyn_p`.{q(WEIGHT)}"
COPIES = "`_dyn_copies`"


def applies(node: Join, d: Optional["Differentiator"]) -> bool:
    return node.kind != "inner"


def _condition(node: Join) -> str:
    return expr(node.condition) if node.condition is not None else "TRUE"


def _listed(columns: List[str]) -> str:
    return ", ".join(q(c) for c in columns)


def _joined(node: Join, kind: str, preserved: str, other: str, weight: str) -> str:
    """``preserved`` ``kind``-joined to ``other`` on the join's condition, weighted."""
    return (
        f"SELECT {with_weight(node.columns, weight)} FROM ({preserved}) AS `_dyn_p` "
        f"{kind} JOIN ({other}) AS `_dyn_o` ON {_condition(node)}"
    )


def _touched(node: Join, side: Node, side_rows: str, other_delta: str) -> str:
    """Distinct rows of ``side_rows`` matching some row of ``other_delta`` (those whose padding
    may flip), with their multiplicity."""
    listed = _listed(side.columns)
    return (
        f"SELECT {listed}, COUNT(*) AS {COPIES} FROM (SELECT {cols(side.columns)} "
        f"FROM ({side_rows}) AS `_dyn_p` LEFT SEMI JOIN ({other_delta}) AS `_dyn_o` "
        f"ON {_condition(node)}) AS `_dyn_a` GROUP BY {listed}"
    )


def _unmatched(node: Join, rows: str, other: str, weight: str) -> str:
    """Rows of ``rows`` with no partner in ``other``, padded with typed NULLs."""
    return (
        f"SELECT {with_weight(node.columns, weight)} FROM ({rows}) AS `_dyn_p` "
        f"LEFT JOIN (SELECT *, TRUE AS `_dyn_matched` FROM ({other}) AS `_dyn_m`) AS `_dyn_o` "
        f"ON {_condition(node)} WHERE `_dyn_o`.`_dyn_matched` IS NULL"
    )


def _counted_flips(
    node: Join, d: "Differentiator", side: Node, other: Node, probes: str, other_delta: str
) -> str:
    """Padded rows of ``side`` whose padding changes: ``probes`` are distinct rows with ``_dyn_n0``
    and ``_dyn_n1``, the copies of each that count at the interval's start and end; each row's
    partners are counted at both ends from other|I0 and ``other_delta``."""
    listed = _listed(side.columns)
    partners = union_all(
        [
            f"SELECT {cols(other.columns)}, CAST(1 AS BIGINT) AS `_dyn_c0`, CAST(1 AS BIGINT) AS `_dyn_c1` "
            f"FROM ({d.before(other)}) AS `_dyn_b`",
            f"SELECT {cols(other.columns)}, CAST(0 AS BIGINT) AS `_dyn_c0`, {q(WEIGHT)} AS `_dyn_c1` "
            f"FROM ({other_delta}) AS `_dyn_b`",
        ]
    )
    # Probes without a partner at either end (rows of ΔR in a full join) still count: LEFT JOIN.
    changed = (
        f"SELECT {listed}, CAST("
        f"CASE WHEN COALESCE(SUM(`_dyn_o`.`_dyn_c1`), 0) = 0 THEN `_dyn_n1` ELSE 0 END - "
        f"CASE WHEN COALESCE(SUM(`_dyn_o`.`_dyn_c0`), 0) = 0 THEN `_dyn_n0` ELSE 0 END AS BIGINT) "
        f"AS {q(WEIGHT)} FROM ({probes}) AS `_dyn_p` LEFT JOIN ({partners}) AS `_dyn_o` "
        f"ON {_condition(node)} GROUP BY {listed}, `_dyn_n0`, `_dyn_n1`"
    )
    # Padded by a left join against no rows of the other side's type, which the engine plans
    # as typed NULL literals.
    return (
        f"SELECT {with_weight(node.columns, DELTA_WEIGHT)} FROM ({changed}) AS `_dyn_p` "
        f"LEFT JOIN (SELECT {cols(other.columns)} FROM ({other_delta}) AS `_dyn_b` WHERE FALSE) "
        f"AS `_dyn_o` ON TRUE WHERE {DELTA_WEIGHT} <> 0"
    )


def _padding_changes(
    node: Join, d: "Differentiator", side: Node, other: Node, touched: str, side_delta: Optional[str]
) -> str:
    """The change in ``pad(side ▷ other)`` from the flips of ``touched`` (``_touched``'s rows) and,
    when given, from the rows of ``side_delta``."""
    other_delta = d.derive(other)
    assert other_delta is not None, "rows are touched only by the other side's changes"
    if side_delta is None and d.positive(other):
        return _unmatched(node, touched, d.before(other), f"-`_dyn_p`.{COPIES}")
    probes = (
        f"SELECT {cols(side.columns)}, {COPIES} AS `_dyn_n0`, {COPIES} AS `_dyn_n1` "
        f"FROM ({touched}) AS `_dyn_t`"
    )
    if side_delta is not None:
        listed = _listed(side.columns)
        own = (
            f"SELECT {cols(side.columns)}, CAST(0 AS BIGINT) AS `_dyn_n0`, {q(WEIGHT)} AS `_dyn_n1` "
            f"FROM ({side_delta}) AS `_dyn_t`"
        )
        probes = (
            f"SELECT {listed}, SUM(`_dyn_n0`) AS `_dyn_n0`, SUM(`_dyn_n1`) AS `_dyn_n1` "
            f"FROM ({union_all([probes, own])}) AS `_dyn_t` GROUP BY {listed}"
        )
    return _counted_flips(node, d, side, other, probes, other_delta)


def _preserved_side(node: Join, d: "Differentiator", side: Node, other: Node) -> List[str]:
    """The terms of a join that preserves ``side``: the inner part, and ``side``'s padding."""
    terms: List[str] = []
    side_delta = d.derive(side)
    if side_delta is not None:
        terms.append(_joined(node, "LEFT", side_delta, d.after(other), DELTA_WEIGHT))
    other_delta = d.derive(other)
    if other_delta is not None:
        touched = d.share(_touched(node, side, d.before(side), other_delta))
        terms.append(
            _joined(node, "INNER", touched, other_delta, f"`_dyn_p`.{COPIES} * `_dyn_o`.{q(WEIGHT)}")
        )
        terms.append(_padding_changes(node, d, side, other, touched, None))
    return terms


def derive(node: Join, d: "Differentiator") -> Optional[str]:
    if node.kind == "left":
        return union_all(_preserved_side(node, d, node.left, node.right))
    if node.kind == "right":
        return union_all(_preserved_side(node, d, node.right, node.left))
    terms = _preserved_side(node, d, node.left, node.right)
    left_delta, right_delta = d.derive(node.left), d.derive(node.right)
    if left_delta is not None:
        touched = d.share(_touched(node, node.right, d.before(node.right), left_delta))
        terms.append(_padding_changes(node, d, node.right, node.left, touched, right_delta))
    elif right_delta is not None:
        terms.append(_unmatched(node, right_delta, d.after(node.left), DELTA_WEIGHT))
    return union_all(terms)
