"""DISTINCT: a tuple is in the result while its multiplicity in Q is positive.

With ``c0`` the tuple's count in Q|I0 and ``dw`` its summed weight in ΔQ, the tuple's weight in
the derivative is ``[c0 + dw > 0] - [c0 > 0]``; only tuples of ΔQ are looked up in Q|I0
(NULL-safe, as DISTINCT treats NULLs as equal)::

    ΔDISTINCT(Q) = { t : sign(c0(t) + dw(t)) - sign(c0(t)) }   for t in ΔQ

Insert-only specialisation: when ΔQ only inserts, the new tuples are exactly those of ΔQ absent
from Q|I0: ``DISTINCT(ΔQ) ▷ Q|I0`` with weight +1.
Cost: ΔQ grouped once and Q|I0 restricted to its tuples; Q|I1 is never read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from dbt.adapters.dyntable.differentiation.plan import Distinct
from dbt.adapters.dyntable.differentiation.sqltext import cols
from dbt.adapters.dyntable.vocabulary import WEIGHT, null_safe_match
from dbt.adapters.dyntable.vocabulary import quote as q

if TYPE_CHECKING:
    from dbt.adapters.dyntable.differentiation.derivative import Differentiator

NODE = Distinct
RULE = "ΔDISTINCT(Q) = [c0 + ΔQ > 0] - [c0 > 0] over the tuples of ΔQ"
INSERT_ONLY_RULE = "ΔDISTINCT(Q) = DISTINCT(ΔQ) ▷ Q|I0 (ΔQ inserts only)"


def derive(node: Distinct, d: "Differentiator") -> Optional[str]:
    delta = d.derive(node.child)
    if delta is None:
        return None
    columns = node.columns
    listed = ", ".join(q(c) for c in columns)
    before = d.before(node.child)
    if d.positive(node.child):
        d.note(node, INSERT_ONLY_RULE)
        return (
            f"SELECT DISTINCT {cols(columns, '`_dyn_d`')}, CAST(1 AS BIGINT) AS {q(WEIGHT)} "
            f"FROM ({delta}) AS `_dyn_d` LEFT ANTI JOIN ({before}) AS `_dyn_o` "
            f"ON {null_safe_match(columns, '`_dyn_d`', '`_dyn_o`')}"
        )
    summed = f"SELECT {listed}, SUM({q(WEIGHT)}) AS `_dyn_dw` FROM ({delta}) AS `_dyn_x` GROUP BY {listed}"
    counted = (
        f"SELECT {cols(columns, '`_dyn_o`')}, COUNT(*) AS `_dyn_c0` FROM ({before}) AS `_dyn_o` "
        f"LEFT SEMI JOIN ({summed}) AS `_dyn_d` ON {null_safe_match(columns, '`_dyn_o`', '`_dyn_d`')} "
        f"GROUP BY {', '.join(f'`_dyn_o`.{q(c)}' for c in columns)}"
    )
    c0 = "COALESCE(`_dyn_c`.`_dyn_c0`, 0)"
    weight = (
        f"CAST((CASE WHEN {c0} + `_dyn_d`.`_dyn_dw` > 0 THEN 1 ELSE 0 END) - "
        f"(CASE WHEN {c0} > 0 THEN 1 ELSE 0 END) AS BIGINT)"
    )
    return (
        f"SELECT * FROM (SELECT {cols(columns, '`_dyn_d`')}, {weight} AS {q(WEIGHT)} "
        f"FROM ({summed}) AS `_dyn_d` LEFT JOIN ({counted}) AS `_dyn_c` "
        f"ON {null_safe_match(columns, '`_dyn_d`', '`_dyn_c`')}) AS `_dyn_w` WHERE {q(WEIGHT)} <> 0"
    )
