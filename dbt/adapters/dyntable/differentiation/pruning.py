"""Pruned rescans (docs/ARCHITECTURE.md, "Pruned rescans").

The GROUP BY, window and first-row rules recompute what a change touches from their input
restricted to the touched keys: a semi-join, which an engine answers by reading the whole input.
Where one of those keys is a column of the only source that changed below the node, or a
truncation of it to a period (its date, week, month, quarter or year), passed up unchanged, every
touched key lies within the periods the column's values span in the change's files (their
statistics, ``delta_log.value_ranges``). The rescan then reads that source with a range of the
column as a literal condition on its scan, and the engine skips the files outside it by their
statistics; the semi-join still picks the touched keys exactly.

The condition holds on the scan's rows only where filtering them there filters the node's rows by
the key: the path from the node down to the scan passes projections, filters, DISTINCT, the
preserved side of a join, the left side of a semi-join, and group keys of a GROUP BY (a
window's input is not cut: its functions read the neighbouring rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from functools import cached_property
from typing import TYPE_CHECKING, Any, Iterable, List, Mapping, Optional, Sequence, Tuple

from sqlglot import exp

from dbt.adapters.dyntable.delta_log.model import DataFile, ValueRange
from dbt.adapters.dyntable.differentiation.plan import (
    Aggregate,
    Distinct,
    Filter,
    Join,
    Node,
    Project,
    Scan,
    SemiJoin,
)
from dbt.adapters.dyntable.vocabulary import quote as q

if TYPE_CHECKING:
    from dbt.adapters.dyntable.differentiation.derivative import Differentiator

#: The join kinds whose left (right) input's rows pass through whole: a condition on that
#: input's columns can be applied before the join.
_PRESERVED = {"left": ("inner", "left"), "right": ("inner", "right")}
#: The engine's session time zone is less than a day off UTC: a timestamp's period there starts
#: at most a day before its UTC period, and a day after.
_A_DAY = timedelta(days=1)
#: Periods a key may truncate its column to, finest first, each with the coarser ones it nests
#: in (a period's keys then determine the coarser period's: a day lies in one week, month, ...;
#: a week may straddle two months).
_NESTS_IN = {
    "DAY": ("WEEK", "MONTH", "QUARTER", "YEAR"),
    "WEEK": (),
    "MONTH": ("QUARTER", "YEAR"),
    "QUARTER": ("YEAR",),
    "YEAR": (),
}
#: The periods Spark's `date_trunc` and `trunc` name, by their spellings there. Finer than a day
#: (an hour, a minute) bounds by the day it lies in.
_PERIODS = {
    **{unit: "YEAR" for unit in ("YEAR", "YYYY", "YY")},
    "QUARTER": "QUARTER",
    **{unit: "MONTH" for unit in ("MONTH", "MM", "MON")},
    "WEEK": "WEEK",
    **{unit: "DAY" for unit in ("DAY", "DD", "HOUR", "MINUTE", "SECOND", "MILLISECOND", "MICROSECOND")},
}


@dataclass(frozen=True)
class ColumnWithin:
    """A scan's rows whose ``column`` falls in the ``period`` (None: the value itself) of a value
    within ``values``: the rows of the touched keys, where a key is the column truncated to it."""

    column: str
    values: ValueRange
    period: Optional[str] = None

    @cached_property
    def span(self) -> Tuple[Any, Any]:
        """The column's values, low and high, of the rows whose key may be touched: the periods
        ``values`` span, as the engine's session time zone (whatever it is) cuts them."""
        low, high = self.values.low, self.values.high
        if self.period is None:
            return low, high
        if not isinstance(low, datetime):
            return _period_start(low, self.period), _period_end(high, self.period)
        if self.period == "DAY":
            return low - _A_DAY, high + _A_DAY
        first = _period_start(low.astimezone(timezone.utc).date() - _A_DAY, self.period)
        last = _period_end(high.astimezone(timezone.utc).date() + _A_DAY, self.period)
        return _utc_midnight(first) - _A_DAY, _utc_midnight(last) + 2 * _A_DAY

    def condition(self) -> str:
        """The condition as SQL over the scanned table's columns: a range of the column itself,
        which both engines skip files and row groups by."""
        column = q(self.column)
        if self.values.low is None:
            within = "FALSE"
        else:
            low, high = self.span
            within = f"{column} BETWEEN {_literal(low)} AND {_literal(high)}"
        return f"({within} OR {column} IS NULL)" if self.values.nulls else within

    def admits(self, values: Optional[ValueRange]) -> bool:
        """Whether a file of column values ``values`` (None: not bounded) may hold rows within."""
        if values is None or (values.nulls and self.values.nulls):
            return True
        if values.low is None or self.values.low is None:
            return False
        low, high = self.span
        return bool(values.low <= high and low <= values.high)


@dataclass(frozen=True)
class Within:
    """A scan's rows within each of ``columns``' bounds: the keys the change may touch."""

    columns: Tuple[ColumnWithin, ...]

    def condition(self) -> str:
        return " AND ".join(c.condition() for c in self.columns)

    def admits(self, ranges: Mapping[str, ValueRange]) -> bool:
        """Whether a file of these column ``ranges`` (by lower-case name) may hold rows within:
        whether a read skipping files by their statistics reads it."""
        return all(c.admits(ranges.get(c.column.lower())) for c in self.columns)

    def read(self, files: Iterable[DataFile]) -> List[DataFile]:
        """Those of ``files`` a read within skipping files by their statistics reads."""
        return [f for f in files if self.admits(f.ranges)]

    def pruning(self, files: Iterable[DataFile]) -> Optional["Within"]:
        """The bounds of those columns that leave out one of ``files`` at least, None if none
        does: the others would cost a condition and prune nothing (and Sail fails estimating
        the selectivity of a range covering an integer column's whole range)."""
        listed = list(files)
        kept = tuple(
            c for c in self.columns if not all(c.admits(f.ranges.get(c.column.lower())) for f in listed)
        )
        return Within(kept) if kept else None


def restricted(relation: str, bound: Optional[Within]) -> str:
    """``relation`` (a table read by a scan), only its rows within ``bound`` where one is given."""
    return relation if bound is None else f"(SELECT * FROM {relation} WHERE {bound.condition()})"


def within(d: "Differentiator", node: Node, keys: Sequence[exp.Expression]) -> Optional[Tuple[str, Within]]:
    """The source and the condition on its scan that keeps the rows of ``node`` whose ``keys``
    may be touched by the change, by every key that bounds them; None where none does."""
    changing = [t for t in sorted(node.sources()) if not d.resolver.is_unchanged(t)]
    if len(changing) != 1:
        return None
    table = changing[0]
    scans = [n for n in node.walk() if isinstance(n, Scan) and n.table == table]
    if len(scans) != 1:
        return None
    bounds = []
    for key in keys:
        traced = _expression(node, key, period=None)
        if traced is None or traced[0] is not scans[0]:
            continue
        _, column, period = traced
        values = d.resolver.value_range(table, column)
        if values is not None and not (period and isinstance(values.low, int)):
            bounds.append(ColumnWithin(column, values, period))
    return (table, Within(tuple(bounds))) if bounds else None


def _expression(
    node: Node, expression: exp.Expression, period: Optional[str]
) -> Optional[Tuple[Scan, str, Optional[str]]]:
    """The scan and source column ``expression`` (over ``node``'s columns) reads, and the period
    it truncates that column to (None: the column itself), where it is that column, its date or a
    truncation to one of the periods, passed up unchanged; None otherwise. ``period``: the
    truncation of ``expression`` already found above."""
    if isinstance(expression, exp.Column) and not expression.table:
        return _column(node, expression.name, period)
    truncation = _truncation(expression)
    coarsest = None if truncation is None else _coarser(truncation, period)
    return None if coarsest is None else _expression(node, expression.this, coarsest)


def _truncation(expression: exp.Expression) -> Optional[str]:
    """The period ``expression`` truncates its argument to: its date (``to_date(c)``,
    ``CAST(c AS DATE)``), ``date_trunc(unit, c)``, ``trunc(c, unit)``, ``year(c)``."""
    if isinstance(expression, exp.TsOrDsToDate) and not expression.args.get("format"):
        return "DAY"
    if isinstance(expression, (exp.Cast, exp.TryCast)) and expression.to.is_type(exp.DataType.Type.DATE):
        return "DAY"
    if isinstance(expression, exp.Year):
        return "YEAR"
    if isinstance(expression, (exp.TimestampTrunc, exp.DateTrunc)):
        unit = expression.args.get("unit")
        return _PERIODS.get(unit.name.upper()) if isinstance(unit, (exp.Var, exp.Literal)) else None
    return None


def _coarser(inner: str, outer: Optional[str]) -> Optional[str]:
    """The period of ``outer`` (None: none) applied to a value truncated to ``inner``: the
    coarser of the two where one nests in the other; None where they do not (a month of weeks)."""
    if outer is None or outer == inner or outer in _NESTS_IN[inner]:
        return outer or inner
    return inner if inner in _NESTS_IN[outer] else None


def _column(node: Node, name: str, period: Optional[str]) -> Optional[Tuple[Scan, str, Optional[str]]]:
    if isinstance(node, Scan):
        source = dict(zip(node.output_columns, node.source_columns)).get(name)
        return None if source is None else (node, source, period)
    if isinstance(node, Project) and name in node.names:
        return _expression(node.child, node.expressions[node.names.index(name)], period)
    if isinstance(node, (Filter, Distinct)):
        return _column(node.child, name, period)
    if isinstance(node, Aggregate):
        grouped = dict(node.keys).get(name)
        return None if grouped is None else _expression(node.child, grouped, period)
    if isinstance(node, SemiJoin) and name in node.left.columns:
        return _column(node.left, name, period)
    if isinstance(node, Join):
        side, child = ("left", node.left) if name in node.left.columns else ("right", node.right)
        return _column(child, name, period) if node.kind in _PRESERVED[side] else None
    return None


def _literal(value: Any) -> str:
    if isinstance(value, datetime):
        delta = value - datetime(1970, 1, 1, tzinfo=timezone.utc)
        return f"timestamp_micros({delta // timedelta(microseconds=1)})"
    if isinstance(value, date):
        return f"DATE '{value.isoformat()}'"
    return str(int(value))


def _period_start(day: date, period: str) -> date:
    """The first day of ``day``'s period (a week starts on Monday, as Spark's)."""
    if period == "WEEK":
        return day - timedelta(days=day.weekday())
    if period == "DAY":
        return day
    month = {"MONTH": day.month, "QUARTER": day.month - (day.month - 1) % 3, "YEAR": 1}[period]
    return date(day.year, month, 1)


def _period_end(day: date, period: str) -> date:
    """The last day of ``day``'s period."""
    if period in ("DAY", "WEEK"):
        return _period_start(day, period) + timedelta(days=0 if period == "DAY" else 6)
    months = {"MONTH": 1, "QUARTER": 3, "YEAR": 12}[period]
    first = _period_start(day, period)
    following = first.month - 1 + months
    return date(first.year + following // 12, following % 12 + 1, 1) - timedelta(days=1)


def _utc_midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=timezone.utc)
