"""Consistent reads across dynamic tables (docs/ARCHITECTURE.md, "Consistent reads"): a reader
gets several DTs as of their latest common data timestamp, each at the Delta version holding it,
from a model (the `dyntable_consistent` macro) and from the CLI (`dyntable snapshot`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Tuple

import pytest
from dbt.tests.util import run_dbt

from tests.functional.adapter.delta import delta_project
from tests.functional.dynamic_table.dvs import history, project_engine
from tests.functional.runner.test_runner import dyntable
from tests.functional.sources import raw_sources

pytestmark = pytest.mark.jvm_ci

REVENUE = """
{{ config(materialized='dynamic_table', target_lag='1 minute') }}
select customer_id, sum(amount) as total from {{ source('raw', 'orders') }} group by customer_id
"""

ORDER_COUNT = """
{{ config(materialized='dynamic_table', target_lag='1 minute') }}
select count(*) as n from {{ source('raw', 'orders') }}
"""

# Both DTs read one table: at one data timestamp their numbers agree, at two they need not.
READER = """
{{ config(materialized='table') }}
{% set revenue, counts = dyntable_consistent([ref('revenue'), ref('order_count')]) %}
select (select sum(total) from {{ revenue }}) as revenue, (select n from {{ counts }}) as orders
"""

# A view keeps the pinned relations in its definition, where a temp view may not appear.
READER_VIEW = READER.replace("materialized='table'", "materialized='view'")

SOURCES = raw_sources("orders")


@pytest.fixture(scope="class")
def raw(project):
    schema = f"{project.test_schema}_raw"
    project.run_sql(f"create schema if not exists {schema}")
    project.run_sql(
        f"create table {schema}.orders (id bigint, customer_id bigint, amount double) using delta"
    )
    project.run_sql(f"insert into {schema}.orders values (1, 1, 10.0), (2, 2, 20.0)")
    yield schema
    project.run_sql(f"drop schema if exists {schema} cascade")


class TestConsistentReads:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "revenue.sql": REVENUE,
            "order_count.sql": ORDER_COUNT,
            "reader.sql": READER,
            "reader_view.sql": READER_VIEW,
            "sources.yml": SOURCES,
        }

    def orders_at(self, project, raw, version: int) -> Tuple[float, int]:
        [row] = project.run_sql(
            f"select sum(amount), count(*) from {raw}.orders version as of {version}", fetch="all"
        )
        return float(row[0]), int(row[1])

    def reader(self, project, model: str = "reader") -> Tuple[float, int]:
        [row] = project.run_sql(f"select revenue, orders from {project.test_schema}.{model}", fetch="all")
        return float(row[0]), int(row[1])

    def last_refresh(self, warehouse, project, model):
        return history(warehouse, f"{project.test_schema}.{model}")[-1]

    def test_a_reader_sees_both_tables_at_one_data_timestamp(self, project, raw, dyntable_warehouse):
        run_dbt(["run"])
        first = self.last_refresh(dyntable_warehouse, project, "revenue")
        assert (
            self.last_refresh(dyntable_warehouse, project, "order_count").data_timestamp
            == first.data_timestamp
        )
        version = first.source_versions[f"{raw}.orders"]
        assert self.reader(project) == self.orders_at(project, raw, version) == (30.0, 2)
        assert self.reader(project, "reader_view") == (30.0, 2)

        # Only revenue moves on: the common timestamp stays the first one.
        project.run_sql(f"insert into {raw}.orders values (3, 1, 5.0)")
        assert dyntable(project, "refresh", "revenue").exit_code == 0
        moved = self.last_refresh(dyntable_warehouse, project, "revenue")
        assert moved.data_timestamp > first.data_timestamp and moved.refresh_action != "NO_DATA"
        run_dbt(["run", "--select", "reader"])
        assert self.reader(project) == (30.0, 2)
        shown = dyntable(project, "snapshot", "revenue", "order_count")
        assert shown.exit_code == 0, shown.output
        assert f"As of {first.data_timestamp:%Y-%m-%d %H:%M:%S} UTC" in shown.output
        assert f"VERSION AS OF {first.dt_version}" in shown.output

        # One run refreshes both at one data timestamp: the reader, built after them, sees it.
        run_dbt(["run"])
        latest = self.last_refresh(dyntable_warehouse, project, "order_count")
        version = latest.source_versions[f"{raw}.orders"]
        assert self.reader(project) == self.orders_at(project, raw, version) == (35.0, 3)

    def test_the_readme_recipe_finds_the_same_versions(self, project, raw, dyntable_warehouse):
        run_dbt(["run"])
        readme = (Path(__file__).parents[3] / "README.md").read_text()
        recipe = re.search(r"```sql\n(with held as .*?)```", readme, re.S).group(1)
        schema = project.test_schema
        recipe = recipe.replace(
            "'shop.daily_revenue', 'shop.orders_daily'", f"'{schema}.revenue', '{schema}.order_count'"
        )
        found = {row[0]: int(row[2]) for row in project.run_sql(recipe, fetch="all")}
        shown = dyntable(project, "snapshot", "revenue", "order_count").output
        for model in ("revenue", "order_count"):
            assert re.search(rf"{model}\s+│\s+{found[f'{schema}.{model}']}\s", shown), shown

    def test_tables_that_never_met_are_refused_with_the_way_out(self, project, raw, dyntable_warehouse):
        engine = project_engine(project)
        engine.execute(f"drop table {project.test_schema}.order_count").collect()
        run_dbt(["run", "--select", "order_count"])  # rebuilt alone, at a timestamp revenue never held
        shown = dyntable(project, "snapshot", "revenue", "order_count")
        assert shown.exit_code == 1
        assert "hold no data timestamp in common" in shown.stderr and "Refresh them together" in shown.stderr
