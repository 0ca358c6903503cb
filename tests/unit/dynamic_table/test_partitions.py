"""Which window's partitions a refresh counts in the DT before AUTO weighs a change
(``partitions.counted_window``, docs/ARCHITECTURE.md, "Deciding"): one reached through projections
and filters that pass its partition columns to the DT's output, over an input that changes by at
most one row per changed source row."""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import List, Optional

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from dbt.adapters.dyntable.delta_log import DeltaLog
from dbt.adapters.dyntable.differentiation import plan_query
from dbt.adapters.dyntable.dynamic_table.refresh.partitions import counted_here, counted_window
from dbt.adapters.dyntable.engines.base import Capabilities

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


#: An engine whose every read of a table is a job of its own: a small DT's partitions are counted here.
JOBS = Capabilities(
    change_data_feed=False,
    truncate=False,
    alter_table_columns=False,
    persistent_catalog=True,
    counts_held_rows_in_process=True,
)


def test_a_small_dts_partitions_are_counted_from_its_files(tmp_path: Path) -> None:
    """Each distinct (k, d) once, NULLs one value, across files; floats and a missing column left
    to the engine, and every column to an engine that reads a table cheaply or for a large DT."""
    location = str(tmp_path / "dt")
    write_deltalake(
        location, pa.table({"k": [1, 1, 2, None], "d": [date(2026, 1, 1)] * 4, "v": [0.0, -0.0, 1.0, 2.0]})
    )
    write_deltalake(
        location,
        pa.table({"k": [1, None, 3], "d": [date(2026, 1, 1), date(2026, 1, 1), None], "v": [1.0, 2.0, 3.0]}),
        mode="append",
    )
    log = DeltaLog(location)
    size = log.size_bytes(log.latest_version())
    assert counted_here(JOBS, log, size, ["k", "d"]) == 4  # (1, d1), (2, d1), (NULL, d1), (3, NULL)
    assert counted_here(JOBS, log, size, ["k"]) == 4
    assert counted_here(JOBS, log, size, ["v"]) is None
    assert counted_here(JOBS, log, size, ["k", "missing"]) is None
    assert counted_here(replace(JOBS, counts_held_rows_in_process=False), log, size, ["k"]) is None
    assert counted_here(JOBS, log, 1 << 40, ["k"]) is None  # too large for this process
