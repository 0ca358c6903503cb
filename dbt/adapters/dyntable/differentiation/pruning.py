"""Pruned rescans (docs/ARCHITECTURE.md, "Pruned rescans").

The GROUP BY, window and first-row rules recompute what a change touches from their input
restricted to the touched keys: a semi-join, which an engine answers by reading the whole input.
Where one of those keys is a column of the only source that changed below the node (or that
column's date), passed up unchanged, every touched key lies within the range the column's values
span in the change's files (their statistics, ``delta_log.value_ranges``). The rescan then reads
that source with the range as a literal condition on its scan, and the engine skips the files
outside it by their statistics; the semi-join still picks the touched keys exactly.

The condition holds on the scan's rows only where filtering them there filters the node's rows by
the key: the path from the node down to the scan passes projections, filters, DISTINCT, the
preserved side of a join, the left side of a semi-join, and group keys of a GROUP BY (a
window's input is not cut: its functions read the neighbouring rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
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
#: The engine's session time zone may put a timestamp's date a day either side of its UTC date.
_A_DAY = timedelta(days=1)


@dataclass(frozen=True)
class ColumnWithin:
    """A scan's rows whose ``column`` (its date where ``as_date``) falls within ``values``."""

    column: str
    values: ValueRange
    as_date: bool

    def condition(self) -> str:
        """The condition as SQL over the scanned table's columns."""
        column = q(self.column)
        low, high = self.values.low, self.values.high
        if low is None:
            within = "FALSE"
        elif self.as_date:
            within = f"to_date({column}) BETWEEN to_date({_literal(low)}) AND to_date({_literal(high)})"
        else:
            within = f"{column} BETWEEN {_literal(low)} AND {_literal(high)}"
        return f"({within} OR {column} IS NULL)" if self.values.nulls else within

    def admits(self, values: Optional[ValueRange]) -> bool:
        """Whether a file of column values ``values`` (None: not bounded) may hold rows within."""
        if values is None or (values.nulls and self.values.nulls):
            return True
        if values.low is None or self.values.low is None:
            return False
        low, high = self.values.low, self.values.high
        if self.as_date:
            first, last = _day_start(values.low), _day_start(values.high)
            return first <= _day_start(high) + _A_DAY and _day_start(low) - _A_DAY <= last
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
        traced = _expression(node, key, as_date=False)
        if traced is None or traced[0] is not scans[0]:
            continue
        _, column, as_date = traced
        values = d.resolver.value_range(table, column)
        if values is not None and not (as_date and isinstance(values.low, int)):
            bounds.append(ColumnWithin(column, values, as_date))
    return (table, Within(tuple(bounds))) if bounds else None


def _expression(node: Node, expression: exp.Expression, as_date: bool) -> Optional[Tuple[Scan, str, bool]]:
    """The scan and source column ``expression`` (over ``node``'s columns) reads, and whether it
    is that column's date; None unless it is one of them, passed up unchanged."""
    if isinstance(expression, exp.Column) and not expression.table:
        return _column(node, expression.name, as_date)
    dated = (isinstance(expression, exp.TsOrDsToDate) and not expression.args.get("format")) or (
        isinstance(expression, (exp.Cast, exp.TryCast)) and expression.to.is_type(exp.DataType.Type.DATE)
    )
    if dated and not as_date and isinstance(expression.this, exp.Column) and not expression.this.table:
        return _column(node, expression.this.name, as_date=True)
    return None


def _column(node: Node, name: str, as_date: bool) -> Optional[Tuple[Scan, str, bool]]:
    if isinstance(node, Scan):
        source = dict(zip(node.output_columns, node.source_columns)).get(name)
        return None if source is None else (node, source, as_date)
    if isinstance(node, Project) and name in node.names:
        return _expression(node.child, node.expressions[node.names.index(name)], as_date)
    if isinstance(node, (Filter, Distinct)):
        return _column(node.child, name, as_date)
    if isinstance(node, Aggregate):
        grouped = dict(node.keys).get(name)
        return None if grouped is None else _expression(node.child, grouped, as_date)
    if isinstance(node, SemiJoin) and name in node.left.columns:
        return _column(node.left, name, as_date)
    if isinstance(node, Join):
        side, child = ("left", node.left) if name in node.left.columns else ("right", node.right)
        return _column(child, name, as_date) if node.kind in _PRESERVED[side] else None
    return None


def _literal(value: Any) -> str:
    if isinstance(value, datetime):
        delta = value - datetime(1970, 1, 1, tzinfo=timezone.utc)
        return f"timestamp_micros({delta // timedelta(microseconds=1)})"
    if isinstance(value, date):
        return f"DATE '{value.isoformat()}'"
    return str(int(value))


def _day_start(value: Any) -> datetime:
    """``value`` (a date or an aware timestamp) as the UTC start of its day."""
    day = value.astimezone(timezone.utc).date() if isinstance(value, datetime) else value
    return datetime(day.year, day.month, day.day, tzinfo=timezone.utc)
