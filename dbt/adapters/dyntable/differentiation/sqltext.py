"""Small builders for the Spark SQL text the renderer and the rules emit.

Every relation a rule produces is a SELECT whose output columns are listed and aliased explicitly
(Sail rejects duplicate unqualified field names), and every subquery in FROM gets an alias.
"""

from __future__ import annotations

from typing import Iterable, List, Optional, Sequence

from sqlglot import exp

WEIGHT = "_dyn_weight"


def q(identifier: str) -> str:
    return "`" + identifier.replace("`", "``") + "`"


def expr(expression: exp.Expression) -> str:
    return expression.sql(dialect="spark")


def cols(columns: Iterable[str], qualifier: Optional[str] = None) -> str:
    prefix = f"{qualifier}." if qualifier else ""
    return ", ".join(f"{prefix}{q(c)} AS {q(c)}" for c in columns)


def with_weight(columns: Sequence[str], weight: str, qualifier: Optional[str] = None) -> str:
    """The select list ``columns..., <weight> AS _dyn_weight``."""
    listed = cols(columns, qualifier)
    return f"{listed}, {weight} AS {q(WEIGHT)}" if listed else f"{weight} AS {q(WEIGHT)}"


def null_safe_equal(columns: Sequence[str], left: str, right: str) -> str:
    return " AND ".join(f"{left}.{q(c)} <=> {right}.{q(c)}" for c in columns) or "TRUE"


def union_all(terms: List[str]) -> Optional[str]:
    """The bag union of delta terms (None when there are none: the delta is empty)."""
    if not terms:
        return None
    if len(terms) == 1:
        return terms[0]
    return "\nUNION ALL\n".join(f"SELECT * FROM ({t}) AS `_dyn_u{i}`" for i, t in enumerate(terms))


def signed(relation: str, columns: Sequence[str], sign: int) -> str:
    """Every row of a plain relation as a delta row of weight ``sign``."""
    return f"SELECT {with_weight(columns, f'CAST({sign} AS BIGINT)')} FROM ({relation}) AS `_dyn_s`"


def consolidate(delta: str, columns: Sequence[str], *, positive: bool = False) -> str:
    """At most one row per distinct tuple (NULLs group together), weights summed, zeros dropped.
    ``positive`` deltas cannot cancel, so they skip the filter.

    >>> print(consolidate("SELECT * FROM d", ["a"]))
    SELECT `a`, CAST(`_dyn_sum` AS BIGINT) AS `_dyn_weight` FROM (SELECT `a`, SUM(`_dyn_weight`) AS `_dyn_sum` FROM (SELECT * FROM d) AS `_dyn_c` GROUP BY `a`) AS `_dyn_g` WHERE `_dyn_sum` <> 0
    """
    listed = ", ".join(q(c) for c in columns)
    # The sum gets its own name: Sail resolves `_dyn_weight` in a HAVING to the output alias.
    nonzero = "" if positive else " WHERE `_dyn_sum` <> 0"
    return (
        f"SELECT {listed}, CAST(`_dyn_sum` AS BIGINT) AS {q(WEIGHT)} FROM (SELECT {listed}, "
        f"SUM({q(WEIGHT)}) AS `_dyn_sum` FROM ({delta}) AS `_dyn_c` GROUP BY {listed}) AS `_dyn_g`"
        f"{nonzero}"
    )
