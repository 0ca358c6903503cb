"""Pruned rescans (docs/ARCHITECTURE.md, "Pruned rescans"): a GROUP BY, window or first-row DT
whose key is a source column, or its date (or month), recomputes the touched groups from the source's files
whose statistics say they may hold the change's keys, not from all of them. A source loaded day
by day, then changed on its last days: each refresh is INCREMENTAL, reads (by the refresh
history) only the files of the days the change spans, says so in its reason, and every DT equals
its query at its data timestamp; rows with a NULL key and a change that spans every day are
recomputed from all the files, still exactly. A monthly rollup of events loaded month by month
reads the last month's files for a change in it."""

from __future__ import annotations

import pytest
from dbt.tests.util import run_dbt

from tests.functional.adapter.delta import delta_project
from tests.functional.lifecycle.helpers import assert_refreshed
from tests.functional.sources import raw_sources

pytestmark = pytest.mark.jvm_ci

DAYS, DEVICES, PER_DAY = 8, 50, 2000
#: 2024-01-01 00:00 UTC; a reading every ``86400 / PER_DAY`` seconds.
START = 1704067200

DAILY = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}
select device_id, to_date(reading_at) as day, count(*) as readings, max(temp) as max_temp,
       avg(temp) as avg_temp
from {{ source('raw', 'readings') }} group by device_id, to_date(reading_at)
"""
#: A join to an unchanged table, grouped by a plain timestamp column's date and a column of it.
SITE_DAILY = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}
select d.site, r.day, count(*) as readings, min(r.temp) as min_temp
from (select device_id, cast(reading_at as date) as day, temp from {{ source('raw', 'readings') }}) as r
join {{ source('raw', 'devices') }} as d on d.device_id = r.device_id
group by d.site, r.day
"""
#: The hottest reading of each day: the first-row rule's rescan.
HOTTEST = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}
select reading_id, device_id, reading_at, temp from (
    select reading_id, device_id, reading_at, temp,
           row_number() over (partition by to_date(reading_at) order by temp desc, reading_id) as rk
    from {{ source('raw', 'readings') }}) as ranked
where rk = 1
"""
#: Events grouped by their month, through a view-like subquery's date: nested truncations.
MONTHLY = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}
select trunc(day, 'MM') as month, count(*) as events, max(v) as top
from (select to_date(event_at) as day, v from {{ source('raw', 'events') }}) as e
group by trunc(day, 'MM')
"""
MONTHS, PER_MONTH = 12, 100


def readings(first: int, count: int) -> str:
    """``count`` readings from ``first`` on, in time order: ``PER_DAY`` a day."""
    seconds = 86400 // PER_DAY
    return (
        f"select id as reading_id, cast(id % {DEVICES} as bigint) as device_id, "
        f"timestamp_seconds({START} + id * {seconds}) as reading_at, cast(id * 7 % 41 as double) as temp "
        f"from range({first}, {first + count})"
    )


@pytest.fixture(scope="class")
def raw(project):
    schema = f"{project.test_schema}_raw"
    project.run_sql(f"create schema if not exists {schema}")
    project.run_sql(
        f"create table {schema}.readings (reading_id bigint, device_id bigint, reading_at timestamp, "
        "temp double) using delta"
    )
    for day in range(DAYS):  # one commit a day: its files hold that day's readings only
        project.run_sql(f"insert into {schema}.readings {readings(day * PER_DAY, PER_DAY)}")
    project.run_sql(
        f"create table {schema}.devices using delta as select id as device_id, id % 5 as site from range({DEVICES})"
    )
    project.run_sql(
        f"create table {schema}.events (event_id bigint, event_at timestamp, v double) using delta"
    )
    for month in range(1, MONTHS + 1):  # one commit a month, mid-month
        project.run_sql(
            f"insert into {schema}.events select id, timestamp_seconds(unix_timestamp('2024-{month:02d}-15 00:00:00') "
            f"+ id * 60), cast(id % 17 as double) from range({month * PER_MONTH}, {(month + 1) * PER_MONTH})"
        )
    yield schema
    project.run_sql(f"drop schema if exists {schema} cascade")


def files_read(row) -> int:
    assert row.source_files_read is not None, row
    return row.source_files_read


class TestPrunedRescans:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "daily.sql": DAILY,
            "daily_auto.sql": DAILY.replace("'incremental'", "'auto'"),
            "site_daily.sql": SITE_DAILY,
            "hottest.sql": HOTTEST,
            "monthly.sql": MONTHLY,
            "sources.yml": raw_sources("readings", "devices", "events"),
        }

    def test_a_change_of_the_last_day_reads_its_files_only(self, project, raw, dyntable_warehouse):
        run_dbt(["run"])
        full = {
            m: files_read(assert_refreshed(project, dyntable_warehouse, m, "REINITIALIZE"))
            for m in ("daily", "hottest", "monthly")
        }
        last_day = (DAYS - 1) * PER_DAY
        project.run_sql(
            f"update {raw}.readings set temp = temp + 50 where reading_id in ({last_day + 3}, {last_day + 700})"
        )
        project.run_sql(f"delete from {raw}.readings where reading_id = {last_day + 11}")
        run_dbt(["run"])
        for model in ("daily", "site_daily"):
            row = assert_refreshed(project, dyntable_warehouse, model, "INCREMENTAL")
            # The rescan reads the files of the last days and the change's, not all of them.
            assert files_read(row) < full["daily"], row
        # AUTO prices the rescan at those files; on JVM Spark a recompute pays its engine jobs as
        # the delta does (docs/ARCHITECTURE.md, "Deciding").
        assert_refreshed(
            project, dyntable_warehouse, "daily_auto", "INCREMENTAL", "at v1 within the change's range"
        )
        row = assert_refreshed(project, dyntable_warehouse, "hottest", "INCREMENTAL")
        assert files_read(row) < full["hottest"], row

    def test_a_change_of_the_last_month_reads_its_files_only(self, project, raw, dyntable_warehouse):
        last_month = MONTHS * PER_MONTH
        project.run_sql(f"update {raw}.events set v = v + 100 where event_id = {last_month + 7}")
        project.run_sql(
            f"insert into {raw}.events values ({last_month + PER_MONTH}, timestamp'2024-12-31 12:00:00', 1.0)"
        )
        run_dbt(["run"])
        row = assert_refreshed(project, dyntable_warehouse, "monthly", "INCREMENTAL")
        # the change's files and the rescan of the last month's: not the other eleven months'
        assert files_read(row) < MONTHS // 2, row

    def test_new_days_and_null_keys_stay_exact(self, project, raw, dyntable_warehouse):
        project.run_sql(f"insert into {raw}.readings {readings(DAYS * PER_DAY, PER_DAY // 2)}")
        project.run_sql(f"insert into {raw}.readings values (-1, 1, null, 99.0), (-2, 2, null, 12.5)")
        run_dbt(["run"])
        for model in ("daily", "daily_auto", "site_daily", "hottest"):
            assert_refreshed(project, dyntable_warehouse, model, ("INCREMENTAL", "FULL"))
        project.run_sql(f"insert into {raw}.events values (-1, null, 5.0)")
        project.run_sql(f"update {raw}.readings set temp = 1.0 where reading_id = -1")
        project.run_sql(f"update {raw}.events set v = v + 1 where event_at is null")
        run_dbt(["run"])
        for model in ("daily", "daily_auto", "site_daily", "hottest", "monthly"):
            assert_refreshed(project, dyntable_warehouse, model, ("INCREMENTAL", "FULL"))

    def test_a_change_of_every_day_reads_every_file(self, project, raw, dyntable_warehouse):
        project.run_sql(f"update {raw}.readings set temp = temp - 1 where reading_id % {PER_DAY} = 5")
        run_dbt(["run"])
        for model in ("daily", "daily_auto", "site_daily", "hottest"):
            assert_refreshed(project, dyntable_warehouse, model, ("INCREMENTAL", "FULL"))
