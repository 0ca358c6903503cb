"""Dynamic tables over a source partitioned by columns of several types: each new version of the
source is built from the one before by typing the partition values its commits record, and the
rows of its changed files carry those values (docs/ARCHITECTURE.md, "Reading sources"). Every
kind of change, rows moved between partitions and null partition values included, leaves each DT
equal to its query at its data timestamp."""

from __future__ import annotations

import pytest
from dbt.tests.util import run_dbt

from tests.functional.adapter.delta import delta_project
from tests.functional.lifecycle.helpers import assert_refreshed
from tests.functional.sources import raw_sources

pytestmark = pytest.mark.jvm_ci

#: Partitioned by a date, a string, an integer, a decimal and a boolean.
EVENTS = (
    "create table {schema}.events (id bigint, amount double, day date, region string, "
    "bucket int, price decimal(10,2), flag boolean) using delta "
    "partitioned by (day, region, bucket, price, flag)"
)

BY_PARTITION = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}
select day, region, bucket, price, flag, count(*) as events, sum(amount) as amount
from {{ source('raw', 'events') }}
group by day, region, bucket, price, flag
"""

ROWS = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}
select id, amount, day, region, bucket, price, flag from {{ source('raw', 'events') }}
where flag or flag is null
"""

DYNAMIC_TABLES = ("by_partition", "rows")


def values(first: int, count: int, day: str, region: str) -> str:
    """``count`` rows from id ``first`` in one day and region, over a few buckets, prices and flags."""
    return ", ".join(
        f"({i}, {i}.25, date'{day}', '{region}', {i % 3}, {i % 2 + 10}.50, {('true', 'false')[i % 2]})"
        for i in range(first, first + count)
    )


class TestPartitionedSources:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        return {"by_partition.sql": BY_PARTITION, "rows.sql": ROWS, "sources.yml": raw_sources("events")}

    @pytest.fixture(scope="class")
    def raw(self, project):
        schema = f"{project.test_schema}_raw"
        project.run_sql(f"create schema if not exists {schema}")
        project.run_sql(EVENTS.format(schema=schema))
        project.run_sql(f"insert into {schema}.events values {values(0, 12, '2026-01-30', 'eu')}")
        yield schema
        project.run_sql(f"drop schema if exists {schema} cascade")

    def refreshed(self, project, warehouse) -> None:
        run_dbt(["run"])
        for model in DYNAMIC_TABLES:
            assert_refreshed(project, warehouse, model, "INCREMENTAL")

    def test_every_change_of_a_partitioned_source(self, project, raw, dyntable_warehouse):
        run_dbt(["run"])
        events = f"{raw}.events"
        project.run_sql(f"insert into {events} values {values(100, 6, '2026-01-31', 'us')}")
        self.refreshed(project, dyntable_warehouse)
        # Null partition values, of every partition column at once.
        project.run_sql(f"insert into {events} values (200, 1.0, null, null, null, null, null)")
        self.refreshed(project, dyntable_warehouse)
        # Rows moved to another day and region (their files rewritten in both partitions).
        project.run_sql(f"update {events} set day = date'2026-02-01', region = 'apac' where id % 4 = 0")
        self.refreshed(project, dyntable_warehouse)
        # A whole partition deleted, and a value updated inside the partitions that stay.
        project.run_sql(f"delete from {events} where region = 'us'")
        project.run_sql(f"update {events} set amount = amount + 1 where bucket = 1")
        self.refreshed(project, dyntable_warehouse)
        # Several commits between two refreshes, the null partition's row moved out of it.
        project.run_sql(f"insert into {events} values {values(300, 4, '2026-02-02', 'eu')}")
        project.run_sql(f"update {events} set flag = true, region = 'eu' where id = 200")
        project.run_sql(f"insert into {events} values {values(400, 2, '2026-02-02', 'latam')}")
        self.refreshed(project, dyntable_warehouse)
