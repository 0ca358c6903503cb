"""AUTO over a window (docs/ARCHITECTURE.md, "Deciding"): before it weighs a change, a refresh
counts the window's partitions in the DT. A change of a few rows touches at most as many of them,
so it is refreshed incrementally and says so; a change of as many rows as there are partitions
recomputes. Each time the DT equals its query at its data timestamp."""

from __future__ import annotations

import pytest
from dbt.tests.util import run_dbt

from tests.functional.adapter.delta import delta_project
from tests.functional.lifecycle.helpers import assert_refreshed
from tests.functional.sources import raw_sources

pytestmark = pytest.mark.jvm_ci

DEVICES, DAYS = 1000, 100
#: Two readings a device a day.
READINGS = 2 * DEVICES * DAYS

TEMP_CHANGE = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='auto') }}
select device_id, day, reading_id, temp,
       temp - lag(temp) over (partition by device_id, day order by reading_id) as temp_change
from {{ source('raw', 'readings') }}
"""


@pytest.fixture(scope="class")
def raw(project):
    schema = f"{project.test_schema}_raw"
    project.run_sql(f"create schema if not exists {schema}")
    project.run_sql(
        f"create table {schema}.readings (reading_id bigint, device_id bigint, day bigint, temp double, humidity double) "
        "using delta"
    )
    project.run_sql(
        f"insert into {schema}.readings select id, id % {DEVICES}, id div {2 * DEVICES}, "
        f"cast(id % 13 as double), 50.0 from range({READINGS})"
    )
    yield schema
    project.run_sql(f"drop schema if exists {schema} cascade")


class TestWindowPartitions:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        return {"temp_change.sql": TEMP_CHANGE, "sources.yml": raw_sources("readings")}

    def test_a_few_rows_touch_few_partitions_and_refresh_incrementally(
        self, project, raw, dyntable_warehouse
    ):
        run_dbt(["run"])
        assert_refreshed(project, dyntable_warehouse, "temp_change", "REINITIALIZE")
        # three readings of two devices' last day
        last = DAYS - 1
        project.run_sql(
            f"insert into {raw}.readings values ({READINGS}, 1, {last}, 30.0, 50.0), "
            f"({READINGS + 1}, 1, {last}, 31.5, 50.0), ({READINGS + 2}, 2, {last}, 12.0, 50.0)"
        )
        run_dbt(["run"])
        # On JVM Spark too: a recompute pays its engine job as staging the delta does.
        row = assert_refreshed(
            project,
            dyntable_warehouse,
            "temp_change",
            "INCREMENTAL",
            f"a change of 3 row(s) touches at most 3 of the {DEVICES * DAYS:,} partitions counted in this table",
        )
        assert (row.rows_inserted, row.rows_deleted) == (3, 0)

    def test_a_change_of_as_many_rows_as_partitions_recomputes(self, project, raw, dyntable_warehouse):
        project.run_sql(f"update {raw}.readings set temp = temp + 1 where reading_id % 2 = 0")
        run_dbt(["run"])
        assert_refreshed(
            project, dyntable_warehouse, "temp_change", "FULL", "partitions counted in this table"
        )

    def test_a_change_of_a_column_the_window_does_not_read_writes_nothing(
        self, project, raw, dyntable_warehouse
    ):
        # A few readings corrected in a column the DT does not read: no change to it.
        project.run_sql(f"update {raw}.readings set humidity = 100.0 where reading_id < 3")
        run_dbt(["run"])
        row = assert_refreshed(
            project, dyntable_warehouse, "temp_change", "NO_DATA", "in columns it does not read"
        )
        assert (row.rows_inserted, row.rows_deleted) == (0, 0)
