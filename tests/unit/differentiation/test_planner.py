"""The planning contract: sources, columns and row keys, views, CTEs, determinism, explain."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import dbt.adapters.dyntable.differentiation as package
from dbt.adapters.dyntable.differentiation import (
    NotIncrementalizable,
    VersionDiffResolver,
    differentiate,
    explain,
    plan_query,
)


def test_sources_are_base_tables_beneath_views_and_ctes() -> None:
    views = {
        "S.Recent": "select id, cid from s.orders where id > 10",
        "s.named": "select r.id, c.name from s.recent r join raw.customers c on r.cid = c.id",
    }
    plan = plan_query(
        "with x as (select id, name from s.named) select name, count(*) as n from x group by name",
        views=views,
    )
    assert plan.sources == ["raw.customers", "s.orders"]
    assert plan.columns == ["name", "n"]
    assert plan.row_key == ["name"]


def test_views_that_reference_each_other_in_a_cycle_are_refused() -> None:
    with pytest.raises(NotIncrementalizable) as raised:
        plan_query("select id from s.a", views={"s.a": "select id from s.b", "s.b": "select id from s.a"})
    assert raised.value.operator == "view"


def test_declared_keys_propagate_through_project_filter_and_join() -> None:
    plan = plan_query(
        "select o.id as order_id, c.id as customer_id, o.amount + 1 as a from s.orders o join s.customers c on o.cid = c.id where o.amount > 0",
        unique_keys={"s.orders": ["id"], "s.customers": ["id"]},
    )
    assert plan.row_key == ["order_id", "customer_id"]
    dropped = plan_query("select o.amount from s.orders o", unique_keys={"s.orders": ["id"]})
    assert dropped.row_key is None


def test_declared_keys_are_told_from_proven_ones_and_may_be_several() -> None:
    declared = plan_query("select email, name from s.users", unique_keys={"s.users": [["id"], ["email"]]})
    assert (declared.row_key, declared.row_key_is_declared) == (["email"], True)  # the first one read
    grouped = plan_query("select id, count(*) as n from s.users group by id", unique_keys={"s.users": ["id"]})
    assert (grouped.row_key, grouped.row_key_is_declared) == (["id"], False)
    # DISTINCT over a declared key: the key the plan proves (every column) is preferred
    distinct = plan_query("select distinct id, name from s.users", unique_keys={"s.users": ["id"]})
    assert (distinct.row_key, distinct.row_key_is_declared) == (["id", "name"], False)


def test_distinct_rows_are_their_own_key() -> None:
    assert plan_query("select distinct a, b from s.t").row_key == ["a", "b"]
    assert plan_query("select a from s.t union all select a from s.u").row_key is None


def test_schema_expands_stars_and_resolves_unqualified_columns() -> None:
    schema = {"s.orders": ["id", "cid", "amount"], "s.customers": ["id", "name"]}
    plan = plan_query("select o.*, name from s.orders o join s.customers c on o.cid = c.id", schema=schema)
    assert plan.columns == ["id", "cid", "amount", "name"]
    assert plan_query("select * from s.orders", schema=schema).columns == ["id", "cid", "amount"]
    with pytest.raises(NotIncrementalizable) as raised:
        plan_query("select name from s.orders o join s.customers c on o.cid = c.id")
    assert raised.value.operator == "column"  # without the schema, either table may have it


def test_duplicate_output_names_are_refused() -> None:
    with pytest.raises(NotIncrementalizable) as raised:
        plan_query("select o.id, c.id from s.orders o join s.customers c on o.cid = c.id")
    assert raised.value.operator == "select"


def test_declared_deterministic_udf_is_accepted() -> None:
    sql = "select normalize_name(name) as n from s.customers"
    with pytest.raises(NotIncrementalizable):
        plan_query(sql)
    assert plan_query(sql, deterministic_functions=frozenset({"normalize_name"})).columns == ["n"]


def test_order_by_without_limit_is_dropped() -> None:
    plan = plan_query("select id from s.orders order by id")
    assert plan.columns == ["id"]


def test_unchanged_sources_prune_every_branch() -> None:
    plan = plan_query("select o.id, c.name from s.orders o join s.customers c on o.cid = c.id")
    delta = differentiate(plan, VersionDiffResolver({"s.orders": (3, 5), "s.customers": (2, 2)}))
    assert "`customers` VERSION AS OF 2" in delta.sql  # orders' changes join customers as they are
    assert "EXCEPT ALL SELECT * FROM `s`.`customers`" not in delta.sql
    assert not delta.insert_only
    appended = differentiate(
        plan, VersionDiffResolver({"s.orders": (3, 5), "s.customers": (2, 2)}, insert_only={"s.orders"})
    )
    assert appended.insert_only and "_dyn_sum` <> 0" not in appended.sql


def test_explain_shows_plan_rules_sql_or_the_reason() -> None:
    report = explain("select k, sum(v) as s from s.t group by k")
    assert "Aggregate BY" in report and "<= Δγk(Q)" in report and "delta SQL:" in report
    refused = explain("select id from s.t limit 3")
    assert refused.startswith("NOT INCREMENTALIZABLE") and "operator: limit" in refused


def test_module_doctests() -> None:
    failed = attempted = 0
    for module in pkgutil.iter_modules(package.__path__):
        result = doctest.testmod(importlib.import_module(f"{package.__name__}.{module.name}"))
        failed += result.failed
        attempted += result.attempted
    assert attempted > 0 and failed == 0
