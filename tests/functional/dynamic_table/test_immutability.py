"""Immutable rows (docs/ARCHITECTURE.md, "Immutable rows"): with `immutable_where`, a dynamic
table's rows outside the region equal its query's at the data timestamp after every refresh, and
its rows inside the region are those it held before: late changes there are ignored (and counted
in the history), a source losing old rows keeps them in the DT, FULL refreshes recompute only the
mutable region, and `backfill_from` fills the region from another table at the first build."""

from __future__ import annotations

from collections import Counter
from datetime import date, timedelta
from typing import Any

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture, write_file

from dbt.adapters.dyntable.dynamic_table.verify import check_dvs
from tests.functional.adapter.delta import delta_project
from tests.functional.dynamic_table.dvs import metadata, project_engine
from tests.functional.lifecycle.helpers import last
from tests.functional.runner.test_runner import dyntable
from tests.functional.sources import raw_sources

pytestmark = pytest.mark.jvm_ci

PREDICATE = "day < current_date() - interval 2 days"

DAILY = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='%s',
          immutable_where="%s"%s) }}
select day, kind, count(*) as n, sum(amount) as total from {{ source('raw', 'events') }} group by day, kind
"""

CONFIGURED = """
{{ config(materialized='dynamic_table', target_lag='1 minute', %s) }}
select day, kind, count(*) as n from {{ source('raw', 'events') }} group by day, kind
"""

SOURCES = raw_sources("events")

TODAY = date.today()
OLD, OLDER, RECENT = TODAY - timedelta(days=5), TODAY - timedelta(days=10), TODAY - timedelta(days=1)


def daily(mode: str, extra: str = "") -> str:
    return DAILY % (mode, PREDICATE, extra)


@pytest.fixture(scope="class")
def raw(project):
    schema = f"{project.test_schema}_raw"
    project.run_sql(f"create schema if not exists {schema}")
    project.run_sql(
        f"create table {schema}.events (id bigint, day date, kind string, amount double) using delta"
    )
    rows = [
        (1, OLDER, "a", 1.0),
        (2, OLDER, "b", 2.0),
        (3, OLD, "a", 3.0),
        (4, OLD, "b", 4.0),
        (5, OLD, "b", 5.0),
        (6, RECENT, "a", 6.0),
        (7, TODAY, "b", 7.0),
    ]
    project.run_sql(
        f"insert into {schema}.events values "
        + ", ".join(f"({i}, date'{d}', '{k}', {a})" for i, d, k, a in rows)
    )
    # An archive of old days, with totals the sources no longer hold.
    project.run_sql(
        f"create table {schema}.archive (day date, kind string, n bigint, total double) using delta"
    )
    project.run_sql(
        f"insert into {schema}.archive values (date'{OLDER}', 'a', 40, 400.0), "
        f"(date'{OLD}', 'z', 50, 500.0), (date'{RECENT}', 'a', 60, 600.0)"
    )
    yield schema
    project.run_sql(f"drop schema if exists {schema} cascade")


def rows(project: Any, sql: str) -> Counter:
    return Counter(tuple(r) for r in project.run_sql(sql, fetch="all"))


def region_rows(project: Any, relation: str, inside: bool) -> Counter:
    condition = PREDICATE if inside else f"not ({PREDICATE})"
    return rows(project, f"select day, kind, n, total from {relation} where {condition}")


def query(raw: str) -> str:
    return f"(select day, kind, count(*) as n, sum(amount) as total from {raw}.events group by day, kind)"


def assert_mutable_region_is_the_query(project: Any, warehouse: Any, model: str) -> None:
    name = f"{project.test_schema}.{model}"
    check = check_dvs(project_engine(project), metadata(warehouse), name, immutable_where=PREDICATE)
    assert check.ok, check.detail
    assert check.rows > 0


class TestImmutableWhere:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "daily.sql": daily("incremental"),
            "daily_full.sql": daily("full"),
            "daily_backfilled.sql": daily("auto", ", backfill_from=target.schema ~ '_raw.archive'"),
            "sources.yml": SOURCES,
        }

    def test_immutable_rows_survive_late_changes_and_source_retention(self, project, raw, dyntable_warehouse):
        schema = project.test_schema
        run_dbt(["run", "--select", "daily", "daily_full"])
        for model in ("daily", "daily_full"):  # the first build ignores the predicate
            assert rows(project, f"select * from {schema}.{model}") == rows(
                project, f"select * from {query(raw)}"
            )
        frozen = region_rows(project, f"{schema}.daily", inside=True)
        assert frozen  # the test's data has rows in the region

        # Late data in the region: one group changed (a row inserted) and one group changed (a
        # row deleted): each is a delete and an insert of the group's row, 4 row changes in all.
        project.run_sql(
            f"insert into {raw}.events values (8, date'{OLD}', 'a', 30.0), (9, date'{TODAY}', 'a', 9.0)"
        )
        project.run_sql(f"delete from {raw}.events where id = 5")
        run_dbt(["run", "--select", "daily", "daily_full"])
        incremental = last(project, dyntable_warehouse, "daily")
        assert incremental.refresh_action == "INCREMENTAL" and incremental.immutable_rows_ignored == 4
        assert last(project, dyntable_warehouse, "daily_full").refresh_action == "FULL"
        for model in ("daily", "daily_full"):
            assert region_rows(project, f"{schema}.{model}", inside=True) == frozen
            assert_mutable_region_is_the_query(project, dyntable_warehouse, model)

        # The source drops its old days (retention): the DT keeps them.
        project.run_sql(f"delete from {raw}.events where day < date'{TODAY - timedelta(days=3)}'")
        run_dbt(["run", "--select", "daily", "daily_full"])
        for model in ("daily", "daily_full"):
            assert region_rows(project, f"{schema}.{model}", inside=True) == frozen
            assert_mutable_region_is_the_query(project, dyntable_warehouse, model)

        shown = " ".join(dyntable(project, "explain", "daily").output.split())
        assert f"immutable where: {PREDICATE}" in shown, shown

        # --full-refresh computes every row again: the old days are gone with the source's rows.
        run_dbt(["run", "--select", "daily", "--full-refresh"])
        assert rows(project, f"select * from {schema}.daily") == rows(project, f"select * from {query(raw)}")
        assert not region_rows(project, f"{schema}.daily", inside=True)

    def test_backfill_fills_the_region_from_a_table(self, project, raw, dyntable_warehouse):
        schema = project.test_schema
        run_dbt(["run", "--select", "daily_backfilled"])
        archive = f"(select day, kind, n, total from {raw}.archive)"
        assert region_rows(project, f"{schema}.daily_backfilled", inside=True) == region_rows(
            project, archive, inside=True
        )
        assert_mutable_region_is_the_query(project, dyntable_warehouse, "daily_backfilled")
        # The archive's row for a recent day is not in the region: it was not copied.
        assert (RECENT, "a", 60, 600.0) not in rows(project, f"select * from {schema}.daily_backfilled")
        project.run_sql(f"insert into {raw}.events values (10, date'{TODAY}', 'c', 1.0)")
        run_dbt(["run", "--select", "daily_backfilled"])
        assert last(project, dyntable_warehouse, "daily_backfilled").refresh_action in ("INCREMENTAL", "FULL")
        assert region_rows(project, f"{schema}.daily_backfilled", inside=True) == region_rows(
            project, archive, inside=True
        )
        assert_mutable_region_is_the_query(project, dyntable_warehouse, "daily_backfilled")


class TestBadImmutabilityConfig:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        return {"daily.sql": daily("auto"), "sources.yml": SOURCES}

    @pytest.mark.parametrize(
        "config, expected",
        [
            ('immutable_where="day < (select max(day) from t)"', "may not read tables"),
            ('immutable_where="count(*) > 1"', "may not aggregate"),
            ("backfill_from='archive'", "backfill_from needs immutable_where"),
            (
                f'immutable_where="{PREDICATE}", backfill_from="no such table"',
                "backfill_from 'no such table'",
            ),
        ],
    )
    def test_one_clear_error(self, project, raw, config: str, expected: str) -> None:
        write_file(CONFIGURED % config, project.project_root, "models", "bad.sql")
        try:
            _, log = run_dbt_and_capture(["run", "--select", "bad"], expect_pass=False)
        finally:
            write_file("select 1 as x", project.project_root, "models", "bad.sql")
        text = " ".join(log.split())
        assert "Model 'bad'" in text and expected in text, text[-2000:]

    def test_a_missing_backfill_table_is_named(self, project, raw) -> None:
        config = f'immutable_where="{PREDICATE}", backfill_from="missing_archive"'
        write_file(CONFIGURED % config, project.project_root, "models", "bad.sql")
        try:
            _, log = run_dbt_and_capture(["run", "--select", "bad"], expect_pass=False)
        finally:
            write_file("select 1 as x", project.project_root, "models", "bad.sql")
        text = " ".join(log.split())
        assert f"backfill_from {project.test_schema}.missing_archive cannot be read" in text, text[-2000:]
