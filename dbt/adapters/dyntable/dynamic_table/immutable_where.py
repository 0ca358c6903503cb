"""Immutable rows (docs/ARCHITECTURE.md, "Immutable rows"): `immutable_where` marks rows of a
DT that refreshes never insert, delete or recompute, and `backfill_from` fills that region from an
existing table when the DT is first built.

The predicate is over the DT's output columns and is evaluated at the refresh's data timestamp T:
`current_timestamp()`, `now()` and `current_date()` in it mean T (``clock.py``), so a predicate such as
``order_date < current_date() - interval 7 days`` moves rows into the immutable region as T
advances, the same way on every engine and in every retry of a refresh. After each refresh, the
DT's rows outside the region equal the query's rows outside it at T, and its rows inside it are
the ones it held before (the first build, which ignores the predicate, excepted).

>>> print(immutability_problem("order_date < current_date() - interval 7 days"))
None
>>> immutability_problem("amount > (select avg(amount) from t)")[:37]
'may not read tables (a subquery): use'
>>> from datetime import timezone
>>> region("day < current_date()", datetime(2026, 11, 23, 10, 30, tzinfo=timezone.utc))
'COALESCE((day < CAST(TIMESTAMP_MICROS(1795429800000000) AS DATE)), FALSE)'
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING, Iterable, List, Optional

import sqlglot
from sqlglot import exp

from dbt.adapters.dyntable.dynamic_table.clock import at_data_timestamp
from dbt.adapters.dyntable.vocabulary import DIALECT, quote

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

#: `backfill_from`: a table, optionally qualified by its schema.
TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")
EXAMPLE = "order_date < current_date() - interval 7 days"


def _parsed(predicate: str) -> exp.Expr:
    parsed: exp.Expr = sqlglot.parse_one(predicate, read=DIALECT)
    return parsed


def immutability_problem(predicate: object) -> Optional[str]:
    """Why ``predicate`` cannot be an `immutable_where` (None: it can)."""
    if not isinstance(predicate, str) or not predicate.strip():
        return f"is not a condition. Use a SQL condition on the table's columns, e.g. {EXAMPLE}."
    try:
        parsed = _parsed(predicate)
    except sqlglot.errors.ParseError as exc:
        return f"is not valid SQL ({str(exc).splitlines()[0]}). Use e.g. {EXAMPLE}."
    if parsed.find(exp.Subquery, exp.Select, exp.Table) is not None:
        return f"may not read tables (a subquery): use a condition on the table's columns, e.g. {EXAMPLE}."
    if parsed.find(exp.AggFunc, exp.Window) is not None:
        return "may not aggregate or use window functions: it decides each row on its own values."
    if parsed.find(exp.Rand, exp.Randn, exp.Uuid) is not None:
        return "may not be random: a row's region must not change between two reads at one time."
    return None


def unknown_columns(predicate: str, columns: Iterable[str]) -> List[str]:
    """The columns ``predicate`` names that are not among ``columns`` (the query's)."""
    known = {c.lower() for c in columns}
    return sorted({c.name for c in _parsed(predicate).find_all(exp.Column) if c.name.lower() not in known})


def region(predicate: str, data_timestamp: datetime) -> str:
    """SQL true for rows in the immutable region at ``data_timestamp``, false otherwise (NULL
    counts as mutable: such a row is kept right by refreshes). Its clock reads
    ``data_timestamp`` (``clock.py``)."""
    pinned = at_data_timestamp(_parsed(predicate), data_timestamp)
    return f"COALESCE(({pinned.sql(dialect=DIALECT)}), FALSE)"


def kept_and_recomputed(predicate: str, held: str, query: str, columns: List[str]) -> str:
    """The rows a rebuild writes: the immutable rows ``held`` (the DT at its current version)
    holds, and the query's rows outside the region."""
    listed = ", ".join(quote(c) for c in columns)
    return (
        f"SELECT {listed} FROM {held} AS h WHERE {predicate} "
        f"UNION ALL SELECT {listed} FROM ({query}) AS q WHERE NOT {predicate}"
    )


def backfilled(predicate: str, backfill: str, query: str, schema: "StructType") -> str:
    """The first build from ``backfill``: its rows inside the region (typed as the query's
    columns), and the query's rows outside it."""
    typed = ", ".join(
        f"CAST({quote(f.name)} AS {f.dataType.simpleString()}) AS {quote(f.name)}" for f in schema.fields
    )
    listed = ", ".join(quote(f.name) for f in schema.fields)
    return (
        f"SELECT {typed} FROM {backfill} AS b WHERE {predicate} "
        f"UNION ALL SELECT {listed} FROM ({query}) AS q WHERE NOT {predicate}"
    )
