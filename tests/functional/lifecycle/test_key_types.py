"""Row keys of every type Spark groups by refresh incrementally: arrays, structs, maps' keys
aside (maps cannot be grouped), decimals, dates, timestamps and binary."""

from __future__ import annotations

import pytest
from dbt.tests.util import run_dbt

from tests.functional.adapter.delta import delta_project
from tests.functional.lifecycle.helpers import assert_refreshed
from tests.functional.sources import raw_sources

KEYS = {
    "array_key": "array(region, channel)",
    "struct_key": "named_struct('r', region, 'c', channel)",
    "decimal_key": "cast(price as decimal(12, 3))",
    "date_key": "to_date(ordered_at)",
    "timestamp_key": "ordered_at",
    "binary_key": "cast(region as binary)",
}

GROUPED = """
{{{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}}}
select {key} as k, count(*) as n, sum(qty) as qty
from {{{{ source('raw', 'sales') }}}}
group by {key}
"""

DISTINCT = """
{{{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}}}
select distinct {key} as k, channel from {{{{ source('raw', 'sales') }}}}
"""

SOURCES = raw_sources("sales")

ROWS = [
    "(1, 'eu', 'web', 10.125, timestamp '2026-01-01 10:00:00', 1)",
    "(2, 'eu', 'shop', 10.125, timestamp '2026-01-01 11:30:00', 2)",
    "(3, 'us', 'web', 7.5, timestamp '2026-01-02 09:15:00', 3)",
    "(4, null, 'web', null, null, 4)",
]


@pytest.fixture(scope="class")
def raw(project):
    schema = f"{project.test_schema}_raw"
    project.run_sql(f"create schema if not exists {schema}")
    project.run_sql(
        f"create table {schema}.sales (id bigint, region string, channel string, price double, "
        "ordered_at timestamp, qty bigint) using delta"
    )
    project.run_sql(f"insert into {schema}.sales values {', '.join(ROWS)}")
    yield schema
    project.run_sql(f"drop schema if exists {schema} cascade")


class TestKeysOfEveryType:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        models = {"sources.yml": SOURCES}
        for name, key in KEYS.items():
            models[f"grouped_{name}.sql"] = GROUPED.format(key=key)
            models[f"distinct_{name}.sql"] = DISTINCT.format(key=key)
        return models

    # The JVM suite's CI subset keys MERGEs of every type through one shape; the full set, both.
    @pytest.mark.parametrize("shape", [pytest.param("grouped", marks=pytest.mark.jvm_ci), "distinct"])
    @pytest.mark.parametrize("key", sorted(KEYS))
    def test_refreshes_incrementally_through_inserts_updates_and_deletes(
        self, project, raw, dyntable_warehouse, shape, key
    ):
        model = f"{shape}_{key}"
        run_dbt(["run", "--select", model, "--full-refresh"])
        assert_refreshed(project, dyntable_warehouse, model, "REINITIALIZE")
        changes = [
            f"insert into {raw}.sales values (5, 'us', 'shop', 7.5, timestamp '2026-01-02 09:15:00', 5), "
            "(6, 'apac', 'web', 1.0, timestamp '2026-01-03 00:00:00', 6)",
            f"update {raw}.sales set qty = qty + 10, channel = 'shop' where id in (1, 4)",
            f"delete from {raw}.sales where id in (3, 6)",
        ]
        for change in changes:
            project.run_sql(change)
            run_dbt(["run", "--select", model])
            assert_refreshed(project, dyntable_warehouse, model, "INCREMENTAL")
        project.run_sql(f"delete from {raw}.sales where id >= 5")
        project.run_sql(
            f"update {raw}.sales set qty = id, channel = case id when 2 then 'shop' else 'web' end"
        )
        project.run_sql(
            f"insert into {raw}.sales values (3, 'us', 'web', 7.5, timestamp '2026-01-02 09:15:00', 3)"
        )
