"""The clock a DT's query reads is its data timestamp (docs/ARCHITECTURE.md, "Queries that read the
clock"): which functions read it, and the query as of an instant."""

from __future__ import annotations

import doctest
from datetime import datetime, timezone

import pytest
import sqlglot

from dbt.adapters.dyntable.dynamic_table import clock, immutable_where, pinning
from dbt.adapters.dyntable.dynamic_table.clock import at_data_timestamp, query_clock
from dbt.adapters.dyntable.dynamic_table.pinning import pin_query

T = datetime(2026, 11, 23, 10, 30, tzinfo=timezone.utc)
MICROS = 1795429800000000


@pytest.mark.parametrize(
    "call, pinned",
    [
        ("current_timestamp()", f"TIMESTAMP_MICROS({MICROS})"),
        ("current_timestamp", f"TIMESTAMP_MICROS({MICROS})"),
        ("now()", f"TIMESTAMP_MICROS({MICROS})"),
        ("current_date()", f"CAST(TIMESTAMP_MICROS({MICROS}) AS DATE)"),
        ("curdate()", f"CAST(TIMESTAMP_MICROS({MICROS}) AS DATE)"),
        ("localtimestamp()", f"CAST(TIMESTAMP_MICROS({MICROS}) AS TIMESTAMP_NTZ)"),
        ("unix_timestamp()", f"UNIX_TIMESTAMP(TIMESTAMP_MICROS({MICROS}))"),
    ],
)
def test_every_clock_function_reads_the_data_timestamp(call: str, pinned: str) -> None:
    tree = sqlglot.parse_one(f"select {call} as c from s.t", read="spark")
    assert at_data_timestamp(tree, T).sql(dialect="spark") == f"SELECT {pinned} AS c FROM s.t"
    assert query_clock(f"select {call} as c from s.t", {}, "s") is not None


def test_a_clock_read_through_a_view_is_found_and_pinned() -> None:
    views = {"s.recent": "select * from s.t where day >= date_sub(current_date(), 7)"}
    assert query_clock("select * from recent", views, "s") == "current_date()"
    assert query_clock("select * from s.t where day >= date '2026-01-01'", views, "s") is None
    pinned = pin_query("select * from recent", {"s.t": 4}, views, "s", data_timestamp=T)
    assert "CURRENT_DATE" not in pinned.upper() and f"TIMESTAMP_MICROS({MICROS})" in pinned
    assert "VERSION AS OF 4" in pinned


@pytest.mark.parametrize("module", [clock, immutable_where, pinning])
def test_module_doctests(module) -> None:
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
