"""The clock a dynamic table's query reads: its data timestamp (docs/ARCHITECTURE.md, "Queries
that read the clock").

A DT equals its query as of its data timestamp T, so `current_timestamp()`, `now()`,
`current_date()` and `localtimestamp()` in the query, in `immutable_where` and in the semantics
check all mean T: a rebuild at T and every later check of it read the same instant. Such a query
cannot be differentiated (the clock changes without any source changing), so it is recomputed,
and a refresh at a new T recomputes it even when no source changed: "where day >= current_date()
- 7" drops a day's rows at midnight.

>>> import sqlglot
>>> moment = datetime(2026, 11, 23, 10, 30, tzinfo=timezone.utc)
>>> query = sqlglot.parse_one("select day >= current_date() - 7", read="spark")
>>> at_data_timestamp(query, moment).sql("spark")
'SELECT day >= CAST(TIMESTAMP_MICROS(1795429800000000) AS DATE) - 7'
>>> query_clock("select a from s.t where ts > now() - interval 1 hour", {}, "s")
'now()'
>>> query_clock("select a from s.t", {}, "s") is None
True
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Mapping, Optional, TypeVar, cast

from sqlglot import exp

from dbt.adapters.dyntable.differentiation.views import expanded_query

Tree = TypeVar("Tree", bound=exp.Expr)

#: Spark built-ins sqlglot parses as anonymous functions that read the clock.
_ANONYMOUS_CLOCKS = frozenset({"now", "current_timestamp", "current_date", "localtimestamp"})


def reads_clock(node: exp.Expr) -> Optional[str]:
    """The clock function ``node`` itself is (as the user would spell it), else None."""
    if isinstance(node, exp.CurrentTimestamp):
        return "current_timestamp()"
    if isinstance(node, exp.CurrentDate):
        return "current_date()"
    if isinstance(node, exp.Localtimestamp):
        return "localtimestamp()"
    if isinstance(node, exp.Anonymous) and node.name.lower() in _ANONYMOUS_CLOCKS:
        return f"{node.name.lower()}()"
    return None


def at_data_timestamp(tree: Tree, data_timestamp: datetime) -> Tree:
    """``tree`` with every clock function replaced by the instant ``data_timestamp``. Dates and
    local timestamps are cast from that instant in the session's time zone, as Spark derives
    `current_date()` and `localtimestamp()` from `current_timestamp()`."""
    micros = round(data_timestamp.astimezone(timezone.utc).timestamp() * 1_000_000)

    def pinned(node: exp.Expr) -> exp.Expr:
        clock = reads_clock(node)
        if clock is None:
            return node
        instant: exp.Expr = exp.func("timestamp_micros", exp.Literal.number(micros))
        if clock == "current_date()":
            return exp.cast(instant, "date")
        if clock == "localtimestamp()":
            return exp.cast(instant, exp.DataType.build("timestamp_ntz", dialect="spark"))
        return instant

    return cast(Tree, tree.transform(pinned))  # the root is a query or a condition, never a clock


def query_clock(sql: str, views: Mapping[str, str], default_schema: str) -> Optional[str]:
    """The first clock function ``sql`` reads, its views expanded, else None."""
    tree = expanded_query(sql, views, default_schema)
    return next((clock for clock in map(reads_clock, tree.walk()) if clock), None)
