"""Which window's partitions a refresh counts in the DT before AUTO weighs a change
(``partitions.counted_window``, docs/ARCHITECTURE.md, "Deciding"): one reached through projections
and filters that pass its partition columns to the DT's output, over an input that changes by at
most one row per changed source row."""

from __future__ import annotations

from typing import List, Optional

import pytest

from dbt.adapters.dyntable.differentiation import plan_query
from dbt.adapters.dyntable.dynamic_table.refresh.partitions import counted_window

SCHEMA = {"s.t": ["k", "d", "v"], "s.u": ["k", "name"]}
LAG = "v - lag(v) over (partition by {} order by v)"


def counted(sql: str) -> Optional[List[str]]:
    found = counted_window(plan_query(sql, schema=SCHEMA))
    return None if found is None else found[1]


@pytest.mark.parametrize(
    "sql, columns",
    [
        # the partition columns under the DT's own names, through a projection that computes
        (f"select k as key, d as day, v, {LAG.format('k, d')} as dv from s.t", ["key", "day"]),
        # through a filter above the window and a projection below it
        (
            f"select * from (select k, d, {LAG.format('k')} as dv from (select k, d, v + 1 as v from s.t)) "
            "where dv > 0",
            ["k"],
        ),
    ],
)
def test_a_window_whose_partition_columns_reach_the_table_is_counted(sql: str, columns: List[str]) -> None:
    assert counted(sql) == columns


@pytest.mark.parametrize(
    "sql",
    [
        # the partition column is not in the DT
        f"select d, v, {LAG.format('k')} as dv from s.t",
        # partitioned by an expression
        f"select k, d, v, {LAG.format('k + 1')} as dv from s.t",
        # over a join: one changed row of s.u changes many rows of the window's input
        "select t.k, v - lag(v) over (partition by t.k order by v) as dv from s.t t join s.u u on t.k = u.k",
        # a first row per partition: its DT holds one row per partition, counted already
        "select k, v from (select k, v, row_number() over (partition by k order by v) as rn from s.t) where rn = 1",
        # no window at all
        "select k, sum(v) as total from s.t group by k",
    ],
)
def test_other_shapes_are_not_counted(sql: str) -> None:
    assert counted(sql) is None
