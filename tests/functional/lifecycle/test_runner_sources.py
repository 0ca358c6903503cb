"""The runner and sources that appear, reappear or just changed: a source that did not exist at a
tick's data timestamp makes its dynamic tables wait (SKIPPED, never a failure), and
`dyntable run --once` refreshes what is stale now."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from dbt.tests.util import run_dbt

from dbt.adapters.dyntable.dynamic_table.lifecycle import Trigger
from dbt.adapters.dyntable.runner.graph import build_graph
from dbt.adapters.dyntable.runner.project import ProjectOptions, load_project
from dbt.adapters.dyntable.runner.scheduler import Scheduler
from tests.functional.adapter.delta import delta_project
from tests.functional.dynamic_table.dvs import history
from tests.functional.lifecycle.helpers import assert_refreshed, commits, location
from tests.functional.runner.test_runner import dyntable
from tests.functional.sources import raw_sources

pytestmark = pytest.mark.jvm_ci

SEED = "customer_id,country\n1,GB\n2,US\n3,NL\n"

BY_COUNTRY = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}
select country, count(*) as customers from {{ ref('customers') }} group by country
"""

LATE = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}
select kind, count(*) as n from {{ source('raw', 'events') }} group by kind
"""

DOWNSTREAM = """
{{ config(materialized='dynamic_table', target_lag='2 minutes') }}
select kind, n * 2 as twice from {{ ref('late') }}
"""

SOURCES = raw_sources("events")


@pytest.fixture(scope="class")
def raw(project):
    schema = f"{project.test_schema}_raw"
    project.run_sql(f"create schema if not exists {schema}")
    project.run_sql(f"create table {schema}.events (id bigint, kind string) using delta")
    project.run_sql(f"insert into {schema}.events values (1, 'click'), (2, 'view')")
    yield schema
    project.run_sql(f"drop schema if exists {schema} cascade")


class TestRunnerAndFreshSources:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def seeds(self):
        return {"customers.csv": SEED}

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "by_country.sql": BY_COUNTRY,
            "late.sql": LATE,
            "downstream.sql": DOWNSTREAM,
            "sources.yml": SOURCES,
        }

    def test_seed_then_run_once(self, project, raw, dyntable_warehouse):
        run_dbt(["seed"])
        run_dbt(["run"])
        run_dbt(["seed", "--full-refresh"])  # reloaded just now, after any period boundary
        once = dyntable(project, "run", "--once")
        assert once.exit_code == 0, once.output
        assert "FAILED" not in once.output and "nothing due" not in once.output
        assert_refreshed(project, dyntable_warehouse, "by_country", "REINITIALIZE", "customers")
        for model in ("late", "downstream"):
            assert (
                history(dyntable_warehouse, f"{project.test_schema}.{model}")[-1].refresh_trigger
                == "SCHEDULED"
            )

    def test_run_once_right_after_a_change_refreshes_it(self, project, raw, dyntable_warehouse):
        run_dbt(["run"])
        project.run_sql(f"insert into {raw}.events values (3, 'click')")
        once = dyntable(project, "run", "--once")
        assert once.exit_code == 0, once.output
        assert_refreshed(project, dyntable_warehouse, "late", "INCREMENTAL")

    def test_a_source_re_created_after_the_tick_waits_and_never_counts_as_a_failure(
        self, project, raw, dyntable_warehouse
    ):
        run_dbt(["run"])
        events = location(project, f"{raw}.events")
        project.run_sql(f"drop table {raw}.events")
        before_creation = int(time.time() * 1000)
        time.sleep(0.05)
        project.run_sql(f"create table {raw}.events (id bigint, kind string) using delta")
        project.run_sql(f"insert into {raw}.events values (7, 'scroll')")
        assert commits(events)

        loaded = load_project(ProjectOptions(Path(project.project_root), Path(project.profiles_dir)))
        scheduler = Scheduler(build_graph(loaded.nodes), loaded.service())
        name = scheduler.graph.by_model("late").name
        roots = [name, scheduler.graph.by_model("downstream").name]
        outcomes = {
            o.model: o
            for o in scheduler.execute(scheduler.dispatch(before_creation, Trigger.SCHEDULED, roots))
        }
        assert outcomes["late"].state == "SKIPPED", outcomes["late"]
        assert "did not exist at the data timestamp" in outcomes["late"].message
        assert outcomes["downstream"].state == "SKIPPED"
        graph = loaded.service().metadata.graph(name)
        assert graph[name].consecutive_failures == 0

        outcomes = {
            o.model: o
            for o in scheduler.execute(scheduler.dispatch(int(time.time() * 1000), Trigger.SCHEDULED, roots))
        }
        assert outcomes["late"].state == "SUCCEEDED", outcomes["late"]
        assert_refreshed(project, dyntable_warehouse, "late", "REINITIALIZE", f"{raw}.events:")
        assert_refreshed(project, dyntable_warehouse, "downstream", ("REINITIALIZE", "INCREMENTAL", "FULL"))
