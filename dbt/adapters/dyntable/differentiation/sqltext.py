"""Small builders for the Spark SQL text the renderer and the rules emit.

Every relation a rule produces is a SELECT whose output columns are listed and aliased explicitly
(Sail rejects duplicate unqualified field names), and every subquery in FROM gets an alias.
"""

from __future__ import annotations

from typing import Iterable, List, Optional, Sequence

from sqlglot import exp

from dbt.adapters.dyntable.vocabulary import DIALECT, WEIGHT
from dbt.adapters.dyntable.vocabulary import quote as q


def expr(expression: exp.Expression) -> str:
    return expression.sql(dialect=DIALECT)


def cols(columns: Iterable[str], qualifier: Optional[str] = None) -> str:
    prefix = f"{qualifier}." if qualifier else ""
    return ", ".join(f"{prefix}{q(c)} AS {q(c)}" for c in columns)


def with_weight(columns: Sequence[str], weight: str, qualifier: Optional[str] = None) -> str:
    """The select list ``columns..., <weight> AS _dyn_weight``."""
    listed = cols(columns, qualifier)
    return f"{listed}, {weight} AS {q(WEIGHT)}" if listed else f"{weight} AS {q(WEIGHT)}"


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
