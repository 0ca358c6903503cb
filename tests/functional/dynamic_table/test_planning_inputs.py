"""What the refresh tells the planner, through dbt on the embedded engine: each source's columns
(from its Delta log), the keys the project declares, and the model's deterministic UDFs.

Every DT here has refresh_mode 'incremental', so a query the planner could not differentiate
would fail its first `dbt run` instead of silently refreshing FULL.
"""

from __future__ import annotations

import sys

import pytest
from dbt.tests.util import get_manifest, run_dbt, run_dbt_and_capture
from pyspark import cloudpickle

from dbt.adapters.dyntable.dynamic_table.declared_keys import declared_keys
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService
from tests.functional.dynamic_table.dvs import assert_dvs, history, project_engine

pytestmark = pytest.mark.jvm_ci

INCREMENTAL = (
    "{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}\n"
)

STAR_DT = (
    INCREMENTAL
    + """
select * from {{ source('raw', 'orders') }} where amount > 10
"""
)

UNQUALIFIED_DT = (
    INCREMENTAL
    + """
select order_id, name, amount
from {{ source('raw', 'orders') }} as o
join {{ source('raw', 'customers') }} as c on o.customer_id = c.customer_id
"""
)

KEYED_DT = (
    INCREMENTAL
    + """
select order_id, customer_id, amount * 2 as doubled from {{ source('raw', 'orders') }}
"""
)

UDF_DT = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental',
          deterministic_functions=['plus_one']) }}
select order_id, plus_one(customer_id) as next_customer from {{ source('raw', 'orders') }}
"""

EXPLAINED_DT = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental',
          post_hook="{{ log('EXPLAIN ' ~ dyntable_explain(), info=True) }}") }}
select customer_id, count(*) as orders from {{ source('raw', 'orders') }} group by customer_id
"""

SOURCES = """
version: 2
sources:
  - name: raw
    schema: "{{ target.schema }}_raw"
    tables:
      - name: orders
        columns:
          - name: order_id
            data_tests: [unique]
      - name: customers
"""

MODELS = ["star_dt", "unqualified_dt", "keyed_dt", "udf_dt", "explained_dt"]


def plus_one(value):
    return None if value is None else value + 1


@pytest.fixture(scope="class")
def raw(project):
    schema = f"{project.test_schema}_raw"
    project.run_sql(f"create schema if not exists {schema}")
    project.run_sql(f"create table {schema}.customers (customer_id bigint, name string) using delta")
    project.run_sql(
        f"create table {schema}.orders (order_id bigint, customer_id bigint, amount double) using delta"
    )
    project.run_sql(f"insert into {schema}.customers values (1, 'ada'), (2, 'grace'), (3, 'edsger')")
    project.run_sql(
        f"insert into {schema}.orders values (10, 1, 50.0), (11, 1, 5.0), (12, 2, 30.0), (13, 3, 20.0)"
    )
    # A Python UDF in the engine's session, as a project would register one in its own code.
    # Pickled by value: JVM Spark runs it in worker processes, which cannot import this test
    # module (pytest put its folder on the test process's path only).
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        project_engine(project).spark.udf.register("plus_one", plus_one, "bigint")
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    yield schema
    project.run_sql(f"drop schema if exists {schema} cascade")


def refresh_views(project) -> set:
    """The temp views refreshes left in the engine's session."""
    listed = project_engine(project).spark.sql("SHOW TABLES LIKE '_dyn_*'").collect()
    return {row.tableName for row in listed if row.isTemporary}


def last(warehouse, project, model):
    return history(warehouse, f"{project.test_schema}.{model}")[-1]


def assert_refreshed_incrementally_and_equal(project, warehouse) -> None:
    """Every DT's last refresh was INCREMENTAL, and it equals its query."""
    for model in MODELS:
        assert last(warehouse, project, model).refresh_action == "INCREMENTAL", model
        assert_dvs(project, warehouse, model)


class TestPlanningInputs:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "star_dt.sql": STAR_DT,
            "unqualified_dt.sql": UNQUALIFIED_DT,
            "keyed_dt.sql": KEYED_DT,
            "udf_dt.sql": UDF_DT,
            "explained_dt.sql": EXPLAINED_DT,
            "sources.yml": SOURCES,
        }

    def test_refreshes_incrementally_and_stays_equal_to_its_query(self, project, raw, dyntable_warehouse):
        run_dbt(["run"])
        project.run_sql(f"insert into {raw}.orders values (14, 2, 70.0), (15, 9, 12.0)")
        project.run_sql(f"update {raw}.orders set amount = 1.0 where order_id = 10")
        project.run_sql(f"update {raw}.customers set name = 'grace h' where customer_id = 2")
        project.run_sql(f"delete from {raw}.orders where order_id = 13")
        run_dbt(["run"])
        assert_refreshed_incrementally_and_equal(project, dyntable_warehouse)
        # Each DT's refresh leaves the views it read for its next refresh to replace
        # (docs/ARCHITECTURE.md, "Reading sources"): they do not pile up, and the next refresh
        # reads its own changes, not what the views held.
        left = refresh_views(project)
        assert left, "the refreshes read their changes through views"
        project.run_sql(f"insert into {raw}.orders values (16, 2, 33.0)")
        project.run_sql(f"update {raw}.customers set name = 'ada l' where customer_id = 1")
        run_dbt(["run"])
        assert_refreshed_incrementally_and_equal(project, dyntable_warehouse)
        assert refresh_views(project) == left

    def test_explain_from_jinja_and_from_python(self, project, raw, dyntable_warehouse):
        # Jinja: the model's post-hook logs dyntable_explain(); this plan proves its key.
        _, log = run_dbt_and_capture(["run", "--select", "explained_dt"])
        assert "EXPLAIN " in log and "Aggregate BY" in log
        assert "output key: customer_id (proven by the plan)" in log
        # The source's unique test keys keyed_dt, which no plan rule could prove.
        manifest = get_manifest(project.project_root)
        manifest.build_flat_graph()
        keys = declared_keys(manifest.flat_graph, "model.test.keyed_dt")
        assert keys == {f"{raw}.orders".lower(): [["order_id"]]}
        frontier = assert_dvs(project, dyntable_warehouse, "keyed_dt")
        dt = DynamicTable.from_node(
            manifest.nodes["model.test.keyed_dt"], manifest.flat_graph, frontier.definition
        )
        assert dt.declared_keys == keys
        service = DynamicTableService(project_engine(project), dyntable_warehouse, "dyntable_meta")
        report = service.explain(dt)
        assert "output key: order_id (declared by unique tests or constraints on its sources)" in report

    def test_a_broken_declared_key_is_matched_whole_with_a_warning(self, project, raw, dyntable_warehouse):
        run_dbt(["run", "--select", "keyed_dt"])
        # Two rows under order_id 12 break the source's unique test; the DT still follows its query.
        project.run_sql(f"insert into {raw}.orders values (12, 3, 31.0)")
        run_dbt(["run", "--select", "keyed_dt"])
        assert_dvs(project, dyntable_warehouse, "keyed_dt")
        project.run_sql(f"update {raw}.orders set amount = 33.0 where order_id = 12 and customer_id = 3")
        _, log = run_dbt_and_capture(["run", "--select", "keyed_dt"])
        assert (
            "its key (order_id), declared by unique tests or constraints on its sources, is not unique" in log
        )
        assert last(dyntable_warehouse, project, "keyed_dt").refresh_action == "INCREMENTAL"
        assert_dvs(project, dyntable_warehouse, "keyed_dt")
        rows = project.run_sql(
            f"select customer_id, doubled from {project.test_schema}.keyed_dt where order_id = 12 order by 1",
            fetch="all",
        )
        assert [tuple(r) for r in rows] == [(2, 60.0), (3, 66.0)]
        project.run_sql(f"delete from {raw}.orders where order_id = 12 and customer_id = 3")


class TestUndeclaredFunction:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "udf_dt.sql": UDF_DT.replace("deterministic_functions=['plus_one']", "tags=['udf']"),
            "sources.yml": SOURCES,
        }

    def test_incremental_mode_fails_naming_the_function_and_the_config(self, project, raw):
        _, log = run_dbt_and_capture(["run"], expect_pass=False)
        assert "udf_dt" in log and "plus_one" in log
        assert "list it in the model's deterministic_functions config" in log
        assert project.run_sql(f"show tables in {project.test_schema} like 'udf_dt'", fetch="all") == []


class TestBadDeterministicFunctions:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "bad_udfs.sql": (
                "{{ config(materialized='dynamic_table', target_lag='1 hour', "
                "deterministic_functions=[1, 2]) }} select 1 as x"
            ),
        }

    def test_names_model_key_and_form(self, project):
        _, log = run_dbt_and_capture(["run"], expect_pass=False)
        assert "Model 'bad_udfs': deterministic_functions [1, 2] is not valid" in log
        assert "a function name or a list of function names" in log
