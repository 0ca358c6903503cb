"""Pruned rescans (``differentiation/pruning.py``): which keys bound the rows a rescan reads, the
condition put on the source's scan, and which files a read within it reads. The engines' reads
are checked in tests/functional/lifecycle/test_pruned_rescans.py."""

from __future__ import annotations

from datetime import date, datetime, timezone
from typing import Dict, Optional, Set, Tuple

import pytest

from dbt.adapters.dyntable.delta_log.model import DataFile, ValueRange
from dbt.adapters.dyntable.delta_log.value_ranges import bounded_columns, from_stats
from dbt.adapters.dyntable.differentiation import differentiate, plan_query
from dbt.adapters.dyntable.differentiation.explain import SymbolicResolver
from dbt.adapters.dyntable.differentiation.pruning import ColumnWithin, Within

JAN_7 = datetime(2024, 1, 7, 23, 0, tzinfo=timezone.utc)
JAN_8 = datetime(2024, 1, 8, 1, 0, tzinfo=timezone.utc)
CHANGED = {("s.t", "ts"): ValueRange(JAN_7, JAN_8, False), ("s.t", "id"): ValueRange(10, 20, True)}


class Bounded(SymbolicResolver):
    """Sources whose changes span the ``ranges`` given; those in ``unchanged`` did not change."""

    def __init__(
        self,
        ranges: Dict[Tuple[str, str], ValueRange] = CHANGED,
        unchanged: Set[str] = frozenset({"s.d"}),
    ) -> None:
        self.ranges, self.unchanged = ranges, unchanged

    def is_unchanged(self, table: str) -> bool:
        return table in self.unchanged

    def value_range(self, table: str, column: str) -> Optional[ValueRange]:
        return self.ranges.get((table, column))


def delta_sql(sql: str, resolver: Optional[SymbolicResolver] = None) -> str:
    return differentiate(plan_query(sql), resolver or Bounded()).sql


#: The change's timestamps, a day either side: a key's date in the engine's time zone.
DAY_BOUND = "`ts` BETWEEN timestamp_micros(1704582000000000) AND timestamp_micros(1704762000000000)"


@pytest.mark.parametrize(
    "sql",
    [
        "select to_date(ts) as day, max(v) as hottest, avg(v) as mean from s.t group by to_date(ts)",
        "select day, count(*) as n from (select cast(ts as date) as day, v from s.t where v > 0) q group by day",
        "select d.site, to_date(t.ts) as day, min(t.v) as m from s.t as t join s.d as d on d.k = t.k "
        "group by d.site, to_date(t.ts)",
        "select to_date(t.ts) as day, count(d.k) as n from s.t as t left join s.d as d on d.k = t.k "
        "group by to_date(t.ts)",
        "select ts, v, row_number() over (partition by to_date(ts) order by v) as rn from s.t",
        # an hour lies within its day
        "select date_trunc('hour', ts) as h, count(*) as n from s.t group by date_trunc('hour', ts)",
        "select ts, v from (select ts, v, row_number() over (partition by to_date(ts) order by v desc) as rn "
        "from s.t) q where rn = 1",
    ],
)
def test_a_key_that_is_a_changed_sources_column_or_its_date_bounds_the_rescan(sql):
    assert DAY_BOUND in delta_sql(sql)


def test_every_bounding_key_is_a_condition_and_nulls_are_kept():
    sql = delta_sql("select id, to_date(ts) as day, max(v) as m from s.t group by id, to_date(ts)")
    assert f"`id` BETWEEN 10 AND 20 OR `id` IS NULL) AND {DAY_BOUND}" in sql


#: A date column whose change spans Wednesday 2024-01-10 to Friday 2024-11-15.
DATES = {("s.t", "d"): ValueRange(date(2024, 1, 10), date(2024, 11, 15), False)}


@pytest.mark.parametrize(
    "key, bound",
    [
        ("d", "DATE '2024-01-10' AND DATE '2024-11-15'"),
        ("date_trunc('week', d)", "DATE '2024-01-08' AND DATE '2024-11-17'"),  # Monday to Sunday
        ("trunc(d, 'MM')", "DATE '2024-01-01' AND DATE '2024-11-30'"),
        ("date_trunc('quarter', d)", "DATE '2024-01-01' AND DATE '2024-12-31'"),
        ("year(d)", "DATE '2024-01-01' AND DATE '2024-12-31'"),
        ("year(date_trunc('month', d))", "DATE '2024-01-01' AND DATE '2024-12-31'"),  # nested periods
    ],
)
def test_a_key_truncating_a_date_bounds_the_rescan_by_whole_periods(key, bound):
    sql = delta_sql(f"select {key} as p, max(v) as m from s.t group by {key}", Bounded(ranges=DATES))
    assert f"`d` BETWEEN {bound}" in sql


def test_a_key_truncating_a_timestamp_widens_its_periods_by_the_engines_time_zone():
    # the change spans 2024-01-07 23:00 to 2024-01-08 01:00 UTC: any time zone puts it in January,
    # or in the last days of December; a day more either side for the periods' ends
    months = delta_sql("select date_trunc('month', ts) as m, count(*) as n from s.t group by 1")
    assert "`ts` BETWEEN timestamp_micros(1703980800000000) AND timestamp_micros(1706832000000000)" in months
    # through a view's date of the timestamp, as the IoT project's monthly rollup reads it
    nested = delta_sql(
        "select trunc(day, 'MM') as m, count(*) as n from (select to_date(ts) as day, v from s.t) q "
        "group by trunc(day, 'MM')"
    )
    assert "`ts` BETWEEN timestamp_micros(1703980800000000) AND timestamp_micros(1706832000000000)" in nested


@pytest.mark.parametrize(
    "sql, resolver",
    [
        # the key is the unchanged side's column
        ("select d.site, max(t.v) as m from s.t as t join s.d as d on d.k = t.k group by d.site", Bounded()),
        # both sides of the join changed: the other side's change touches any day
        (
            "select to_date(t.ts) as day, max(d.w) as m from s.t as t join s.d as d on d.k = t.k "
            "group by to_date(t.ts)",
            Bounded(unchanged=set()),
        ),
        # a full outer join passes no side's rows through whole
        (
            "select to_date(t.ts) as day, count(*) as n from s.t as t full join s.d as d on d.k = t.k "
            "group by to_date(t.ts)",
            Bounded(),
        ),
        # a window below the key reads neighbouring rows: its input is not cut
        (
            "select day, max(step) as m from (select to_date(ts) as day, v - lag(v) over (partition by k order by ts) as step "
            "from s.t) q group by day",
            Bounded(),
        ),
        # the source is read twice: the other read's rows are not bounded by the change
        (
            "select to_date(a.ts) as day, count(*) as n from s.t as a join s.t as b on a.k = b.k "
            "group by to_date(a.ts)",
            Bounded(),
        ),
        # weeks of months: neither period nests in the other
        (
            "select date_trunc('week', trunc(d, 'MM')) as w, count(*) as n from s.t "
            "group by date_trunc('week', trunc(d, 'MM'))",
            Bounded(ranges=DATES),
        ),
        # a month of the year: not in the column's order
        ("select month(d) as m, count(*) as n from s.t group by month(d)", Bounded(ranges=DATES)),
        # a date of a string, a formatted date: not the column's order
        (
            "select to_date(ts, 'yyyy-MM') as m, count(*) as n from s.t group by to_date(ts, 'yyyy-MM')",
            Bounded(),
        ),
        # no statistics bound the change
        ("select to_date(ts) as day, count(*) as n from s.t group by to_date(ts)", Bounded(ranges={})),
    ],
)
def test_keys_that_cannot_bound_the_rescan_leave_it_whole(sql, resolver):
    assert "BETWEEN" not in delta_sql(sql, resolver)


def data_file(low, high, nulls=False) -> DataFile:
    return DataFile("p", "file:///p", 10, 1, {}, {"ts": ValueRange(low, high, nulls)})


def test_a_read_within_reads_the_files_whose_days_may_hold_the_changes():
    within = Within((ColumnWithin("ts", ValueRange(JAN_7, JAN_8, False), period="DAY"),))
    days = [
        data_file(datetime(2024, 1, d, tzinfo=timezone.utc), datetime(2024, 1, d, 20, tzinfo=timezone.utc))
        for d in range(1, 12)
    ]
    read = [f.ranges["ts"].low.day for f in days if within.admits(f.ranges)]
    # within a day of the change's timestamps: the days the engine's time zone may put them on
    assert read == [7, 8, 9]
    assert within.admits({}) and within.pruning(days) == within
    assert within.pruning(days[6:9]) is None  # it leaves out none of these
    nulls = data_file(None, None, nulls=True)
    assert not within.admits(nulls.ranges)


def test_file_statistics_bound_integers_dates_and_timestamps():
    columns = bounded_columns(
        '{"type":"struct","fields":[{"name":"Id","type":"long"},{"name":"ts","type":"timestamp"},'
        '{"name":"d","type":"date"},{"name":"s","type":"string"},{"name":"x","type":"double"},'
        '{"name":"n","type":"integer"}]}',
        "none",
    )
    assert columns == {"Id": "long", "ts": "timestamp", "d": "date", "n": "integer"}
    assert bounded_columns('{"fields":[{"name":"a","type":"long"}]}', "name") == {}
    ranges = from_stats(
        {"Id": 1, "ts": "2024-01-01T00:00:00.123Z", "d": "2024-01-02"},
        {"Id": 9, "ts": "2024-01-03T00:00:00.999Z", "d": "2024-01-05"},
        {"Id": 0, "ts": 2, "d": 0, "n": 4},
        4,
        columns,
    )
    assert ranges["id"] == ValueRange(1, 9, False)
    # Delta truncates timestamps to milliseconds: the upper bound is widened by one
    assert ranges["ts"] == ValueRange(
        datetime(2024, 1, 1, 0, 0, 0, 123000, tzinfo=timezone.utc),
        datetime(2024, 1, 3, 0, 0, 1, 0, tzinfo=timezone.utc),
        True,
    )
    assert ranges["d"] == ValueRange(date(2024, 1, 2), date(2024, 1, 5), False)
    assert ranges["n"] == ValueRange(None, None, True)  # all four rows NULL
    # without a null count a range is not known
    assert from_stats({"Id": 1}, {"Id": 2}, {}, 2, columns) == {}
