"""A DT is planned once while its definition, views, source columns and declared keys stay the
same (a runner's ticks and a long dbt session reuse the plan)."""

from __future__ import annotations

from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.refresh.planned_query import plan

SQL = "select k, count(*) as n from s.t group by k"


def model(sql: str = SQL, **config: str) -> DynamicTable:
    return DynamicTable.from_node(
        {"schema": "s", "name": "dt", "compiled_code": sql, "config": {"target_lag": "1 minute", **config}}
    )


def test_the_same_inputs_reuse_the_plan_and_any_change_replans() -> None:
    columns = {"s.t": ["k", "v"]}
    first = plan(model(), SQL, {}, columns)
    assert plan(model(), SQL, {}, {"s.t": ["k", "v"]}) is first
    assert plan(model(), SQL, {}, {"s.t": ["k", "v", "w"]}) is not first  # a source's columns
    assert plan(model(unique_key="k"), SQL, {}, columns) is not first  # the config
    assert plan(model(), SQL, {"s.v": "select 1 as k"}, columns) is not first  # the views it reads
    other = SQL.replace("count(*)", "sum(v)")
    assert plan(model(other), other, {}, columns) is not first
