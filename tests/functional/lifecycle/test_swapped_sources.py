"""A source swapped for a view and back, and a view under a DT that starts reading another table:
the DT follows what its query reads now (docs/ARCHITECTURE.md, "Reading sources")."""

from __future__ import annotations

import pytest
from dbt.tests.util import run_dbt

from tests.functional.adapter.delta import delta_project
from tests.functional.lifecycle.helpers import assert_refreshed
from tests.functional.sources import raw_sources

pytestmark = pytest.mark.jvm_ci

TOTALS = """
{{ config(materialized='dynamic_table', target_lag='1 minute') }}
select kind, count(*) as n, sum(amount) as amount from {{ source('raw', 'events') }} group by kind
"""

SOURCES = raw_sources("events")


@pytest.fixture(scope="class")
def raw(project):
    schema = f"{project.test_schema}_raw"
    project.run_sql(f"create schema if not exists {schema}")
    for table, rows in (
        ("events", "(1, 'a', 1.0), (2, 'b', 2.0)"),
        ("archive", "(7, 'a', 70.0), (8, 'c', 80.0)"),
    ):
        project.run_sql(f"create table {schema}.{table} (id bigint, kind string, amount double) using delta")
        project.run_sql(f"insert into {schema}.{table} values {rows}")
    yield schema
    project.run_sql(f"drop schema if exists {schema} cascade")


class TestSwappedSources:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        return {"totals.sql": TOTALS, "sources.yml": SOURCES}

    def test_a_source_swapped_for_a_view_and_back(self, project, raw, dyntable_warehouse):
        run_dbt(["run"])
        assert_refreshed(project, dyntable_warehouse, "totals", "REINITIALIZE")
        project.run_sql(f"drop table {raw}.events")
        project.run_sql(f"create view {raw}.events as select * from {raw}.archive where amount > 75")
        run_dbt(["run"])
        assert_refreshed(
            project,
            dyntable_warehouse,
            "totals",
            "REINITIALIZE",
            f"view {raw}.events: now read",
            f"{raw}.events: no longer read",
            f"{raw}.archive: new to this table",
        )
        project.run_sql(f"insert into {raw}.archive values (9, 'c', 90.0), (10, 'a', 1.0)")
        run_dbt(["run"])
        assert_refreshed(project, dyntable_warehouse, "totals", ("INCREMENTAL", "FULL"))
        project.run_sql(f"drop view {raw}.events")
        project.run_sql(f"create table {raw}.events (id bigint, kind string, amount double) using delta")
        project.run_sql(f"insert into {raw}.events values (3, 'd', 4.0)")
        run_dbt(["run"])
        assert_refreshed(
            project,
            dyntable_warehouse,
            "totals",
            "REINITIALIZE",
            f"view {raw}.events: no longer read",
            f"{raw}.events: new to this table",
        )

    def test_a_view_that_starts_reading_another_table(self, project, raw, dyntable_warehouse):
        project.run_sql(f"drop table if exists {raw}.events")
        project.run_sql(f"create or replace view {raw}.events as select * from {raw}.archive")
        run_dbt(["run", "--full-refresh"])
        project.run_sql(f"create table {raw}.fresh (id bigint, kind string, amount double) using delta")
        project.run_sql(f"insert into {raw}.fresh values (20, 'z', 5.0)")
        project.run_sql(
            f"create or replace view {raw}.events as select * from {raw}.archive union all select * from {raw}.fresh"
        )
        run_dbt(["run"])
        assert_refreshed(
            project,
            dyntable_warehouse,
            "totals",
            "REINITIALIZE",
            f"view {raw}.events: redefined",
            f"{raw}.fresh: new to this table",
        )
        project.run_sql(f"create or replace view {raw}.events as select * from {raw}.fresh")
        run_dbt(["run"])
        assert_refreshed(
            project,
            dyntable_warehouse,
            "totals",
            "REINITIALIZE",
            f"view {raw}.events: redefined",
            f"{raw}.archive: no longer read",
        )
        # Redefined over the same table: only the view's fingerprint tells.
        project.run_sql(
            f"create or replace view {raw}.events as select * from {raw}.fresh where amount > 100"
        )
        run_dbt(["run"])
        assert_refreshed(
            project, dyntable_warehouse, "totals", "REINITIALIZE", f"view {raw}.events: redefined"
        )
