"""DTs over DTs whose groups change in place (docs/ARCHITECTURE.md, "Deriving"): a daily rollup
of a source, and rollups of that rollup under AUTO. The upstream's change is its touched groups'
rows replaced; the rollups fold it into their stored groups, reading that change and their own
rows, never the upstream whole. Where a group's new row cannot be told so (its maximum deleted
and nothing as hot inserted; without a count(*), a group that gained no row), the fold's check
fails before anything is written and AUTO rescans the touched groups, or recomputes where its
estimate says that is cheaper, saying why. Every DT equals its query at its data timestamp after
every run."""

from __future__ import annotations

import pytest
from dbt.tests.util import run_dbt

from tests.functional.adapter.delta import delta_project
from tests.functional.lifecycle.helpers import assert_refreshed
from tests.functional.sources import raw_sources

pytestmark = pytest.mark.jvm_ci

SITE_DAILY = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}
select region, site, day, count(*) as readings, max(temp) as max_temp
from {{ source('raw', 'readings') }} group by region, site, day
"""
# Folds with count(*): a group whose count falls to 0 goes away.
REGION_DAILY = """
{{ config(materialized='dynamic_table', target_lag='1 minute') }}
select region, day, sum(readings) as readings, max(max_temp) as max_temp, count(*) as sites
from {{ ref('site_daily') }} group by region, day
"""
# Folds without count(*): only a group that gained a row is known not to be empty.
REGION_HOTTEST = """
{{ config(materialized='dynamic_table', target_lag='1 minute') }}
select region, sum(readings) as readings, max(max_temp) as hottest
from {{ ref('site_daily') }} group by region
"""
ROLLUPS = ("region_daily", "region_hottest")
#: What the history says of a refresh whose fold could not tell a group's new row.
UNTOLD = "took away a group's least or greatest value"
#: What it did instead, by its action.
INSTEAD = {"INCREMENTAL": "rescanned the touched groups instead", "FULL": "recomputed instead"}


def assert_untold(project, warehouse, model: str, action=("INCREMENTAL", "FULL")) -> None:
    """The model's fold could not tell a group's new row; the refresh rescanned its touched
    groups (INCREMENTAL) or recomputed it (FULL), saying which, and the DT equals its query."""
    row = assert_refreshed(project, warehouse, model, action, UNTOLD)
    assert INSTEAD[row.refresh_action.value] in row.reason, row


@pytest.fixture(scope="class")
def raw(project):
    schema = f"{project.test_schema}_raw"
    project.run_sql(f"create schema if not exists {schema}")
    project.run_sql(
        f"create table {schema}.readings (reading_id bigint, region string, site string, day date, "
        "temp double) using delta"
    )
    # 50 regions x 20 sites x 30 days, 2 readings each, below 50 degrees: the daily rollup holds
    # 30,000 rows, so a change of a few of them is a small part of it.
    project.run_sql(
        f"insert into {schema}.readings select id, concat('r', id % 50), concat('s', id % 1000), "
        "date_add(date'2024-01-01', cast(id / 1000 as int) % 30), cast(id * 7 % 50 as double) "
        "from range(60000)"
    )
    yield schema
    project.run_sql(f"drop schema if exists {schema} cascade")


class TestFoldedGroups:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "site_daily.sql": SITE_DAILY,
            "region_daily.sql": REGION_DAILY,
            "region_hottest.sql": REGION_HOTTEST,
            "sources.yml": raw_sources("readings"),
        }

    def test_hotter_readings_fold_into_the_rollups(self, project, raw, dyntable_warehouse):
        run_dbt(["run"])
        for model in ("site_daily", *ROLLUPS):
            assert_refreshed(project, dyntable_warehouse, model, "REINITIALIZE")
        # New maxima in touched groups, a reading moved to another day, a new day.
        project.run_sql(f"update {raw}.readings set temp = temp + 60 where reading_id in (5, 1130)")
        project.run_sql(f"update {raw}.readings set day = date'2024-01-03' where reading_id = 7")
        project.run_sql(f"insert into {raw}.readings values (100000, 'r1', 's1', date'2024-02-09', 20.0)")
        run_dbt(["run"])
        assert_refreshed(project, dyntable_warehouse, "site_daily", "INCREMENTAL")
        for model in ROLLUPS:
            row = assert_refreshed(project, dyntable_warehouse, model, "INCREMENTAL")
            # the upstream's change and the rollup's own rows; the upstream is not read whole
            assert f"{project.test_schema}.site_daily at v" not in (row.reason or ""), row

    def test_an_emptied_group_goes_away_by_its_count(self, project, raw, dyntable_warehouse):
        project.run_sql(f"delete from {raw}.readings where day = date'2024-02-09'")
        run_dbt(["run"])
        assert_refreshed(project, dyntable_warehouse, "region_daily", "INCREMENTAL")
        # Without a count(*) the region that only lost rows may be empty: its groups rescanned
        # (or the rollup recomputed, by AUTO's estimate), saying why.
        assert_untold(project, dyntable_warehouse, "region_hottest")

    def test_a_deleted_maximum_rescans_its_groups(self, project, raw, dyntable_warehouse):
        project.run_sql(f"delete from {raw}.readings where reading_id = 1130")
        run_dbt(["run"])
        # A few of 30,000 site-days touched: rescanning them beats a recompute.
        assert_untold(project, dyntable_warehouse, "region_daily", "INCREMENTAL")
        assert_untold(project, dyntable_warehouse, "region_hottest")
        # An update lowering every other reading of the hottest site-day: still exact.
        project.run_sql(f"update {raw}.readings set temp = temp - 1 where reading_id % 1000 = 5")
        run_dbt(["run"])
        for model in ROLLUPS:
            assert_refreshed(project, dyntable_warehouse, model, ("INCREMENTAL", "FULL"))
