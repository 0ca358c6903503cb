"""The change fuse (docs/ARCHITECTURE.md, "Change fuse"): a refresh changing more of a dynamic
table than `max_change_ratio` / `max_change_rows` allow is not applied, the table is suspended
with the numbers named, and `dyntable resume --accept-change` or `--full-refresh` lets it through."""

from __future__ import annotations

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from dbt.adapters.dyntable.dynamic_table.lifecycle import SchedulingState
from tests.functional.adapter.delta import delta_project
from tests.functional.dynamic_table.dvs import metadata
from tests.functional.lifecycle.helpers import assert_refreshed, last
from tests.functional.runner.test_runner import dyntable
from tests.functional.sources import raw_sources

pytestmark = pytest.mark.jvm_ci

BY_RATIO = """
{{ config(materialized='dynamic_table', target_lag='1 minute', max_change_ratio=0.5) }}
select id, amount from {{ source('raw', 'orders') }}
"""

BY_ROWS = """
{{ config(materialized='dynamic_table', target_lag='1 minute', max_change_rows=3) }}
select id, amount * 2 as doubled from {{ source('raw', 'orders') }}
"""

SOURCES = raw_sources("orders")


def create_orders(project, schema: str, ids: range) -> None:
    project.run_sql(f"create table {schema}.orders (id bigint, amount double) using delta")
    if ids:
        project.run_sql(f"insert into {schema}.orders values " + ", ".join(f"({i}, {i}.5)" for i in ids))


@pytest.fixture(scope="class")
def raw(project):
    schema = f"{project.test_schema}_raw"
    project.run_sql(f"create schema if not exists {schema}")
    create_orders(project, schema, range(10))
    yield schema
    project.run_sql(f"drop schema if exists {schema} cascade")


class TestChangeFuse:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        return {"by_ratio.sql": BY_RATIO, "by_rows.sql": BY_ROWS, "sources.yml": SOURCES}

    def scheduling_state(self, project, warehouse, model):
        name = f"{project.test_schema}.{model}"
        return metadata(warehouse).graph(name)[name]

    def test_a_large_change_is_stopped_until_accepted(self, project, raw, dyntable_warehouse):
        run_dbt(["run", "--select", "by_ratio"])  # a first build is not guarded
        project.run_sql(f"insert into {raw}.orders values (10, 1.0), (11, 2.0)")
        run_dbt(["run", "--select", "by_ratio"])
        assert_refreshed(project, dyntable_warehouse, "by_ratio", ("INCREMENTAL", "FULL"))
        held = project.run_sql(f"select count(*) from {project.test_schema}.by_ratio", fetch="one")[0]

        project.run_sql(f"delete from {raw}.orders where id < 8")  # 8 of 12 rows: 67%
        _, log = run_dbt_and_capture(["run", "--select", "by_ratio"], expect_pass=False)
        text = " ".join(log.split())
        named = f"Dynamic table {project.test_schema}.by_ratio (model by_ratio): "
        assert f"{named}this refresh (" in text and f"{named}Dynamic table" not in text
        assert (
            "would insert 0 and delete 8 of its 12 rows (67% of its rows), over its max_change_ratio of 0.5"
            in text
        )
        assert "dyntable resume by_ratio --accept-change" in text
        failed = last(project, dyntable_warehouse, "by_ratio")
        assert failed.state == "FAILED" and failed.reason == "change fuse: max_change_ratio of 0.5"
        assert (
            self.scheduling_state(project, dyntable_warehouse, "by_ratio").scheduling_state
            == SchedulingState.SUSPENDED
        )
        assert project.run_sql(f"select count(*) from {project.test_schema}.by_ratio", fetch="one")[0] == held

        status = dyntable(project, "status")
        assert "SUSPENDED" in status.output
        resumed = dyntable(project, "resume", "by_ratio", "--accept-change")
        assert resumed.exit_code == 0 and "applies the change the fuse stopped" in resumed.output
        run_dbt(["run", "--select", "by_ratio"])
        assert_refreshed(project, dyntable_warehouse, "by_ratio", ("INCREMENTAL", "FULL"))
        row = self.scheduling_state(project, dyntable_warehouse, "by_ratio")
        assert row.scheduling_state == SchedulingState.ACTIVE and not row.accept_change  # used up

        # A source re-created empty would wipe the table: the rebuild it causes is guarded too.
        project.run_sql(f"drop table {raw}.orders")
        create_orders(project, raw, range(0))
        _, log = run_dbt_and_capture(["run", "--select", "by_ratio"], expect_pass=False)
        assert "would insert 0 and delete 4 of its 4 rows (100% of its rows)" in " ".join(log.split())
        assert last(project, dyntable_warehouse, "by_ratio").refresh_action == "REINITIALIZE"
        # what a person asks for is not: --full-refresh rebuilds it
        run_dbt(["run", "--select", "by_ratio", "--full-refresh"])
        assert_refreshed(project, dyntable_warehouse, "by_ratio", "REINITIALIZE", "--full-refresh")

    def test_explain_shows_the_limits(self, project, raw):
        shown = dyntable(project, "explain", "by_ratio")
        assert (
            shown.exit_code == 0
            and "change fuse: max_change_ratio 0.5 (a larger change is not applied)" in shown.output
        )

    def test_a_row_count_limit(self, project, raw, dyntable_warehouse):
        run_dbt(["run", "--select", "by_rows", "--full-refresh"])
        project.run_sql(f"insert into {raw}.orders values (20, 1.0), (21, 1.0)")
        run_dbt(["run", "--select", "by_rows"])
        assert_refreshed(project, dyntable_warehouse, "by_rows", ("INCREMENTAL", "FULL"))
        project.run_sql(f"insert into {raw}.orders values (22, 1.0), (23, 1.0), (24, 1.0), (25, 1.0)")
        _, log = run_dbt_and_capture(["run", "--select", "by_rows"], expect_pass=False)
        assert (
            "would insert 4 and delete 0 of its 2 rows (200% of its rows), over its max_change_rows of 3"
            in (" ".join(log.split()))
        )
