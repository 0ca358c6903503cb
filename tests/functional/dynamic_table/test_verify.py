"""Verify after refresh (docs/ARCHITECTURE.md, "Verifying"): the `verify` config compares a
dynamic table with its query at its data timestamp after each refresh that writes it and records
the outcome in the refresh history; `dyntable verify` and the `dynamic_table_matches_query` test
do the same on demand. A mismatch is real here: a query whose result changes each time it runs,
or rows written into the table behind dbt-dyntable's back."""

from __future__ import annotations

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from tests.functional.adapter.delta import delta_project
from tests.functional.lifecycle.helpers import assert_refreshed, last
from tests.functional.runner.test_runner import dyntable
from tests.functional.sources import raw_sources

pytestmark = pytest.mark.jvm_ci

CHECKED = """
{{ config(materialized='dynamic_table', target_lag='1 minute', verify='full') }}
select id, amount, cast(null as string) as note from {{ source('raw', 'orders') }}
"""

SAMPLED = """
{{ config(materialized='dynamic_table', target_lag='1 minute', verify='sample', unique_key='id') }}
select id, sum(amount) as total from {{ source('raw', 'orders') }} group by id
"""

# rand() gives other values each time the query runs: the table never equals a recomputation.
RANDOM = """
{{ config(materialized='dynamic_table', target_lag='1 minute', verify='full') }}
select id, rand() as r from {{ source('raw', 'orders') }}
"""

RANDOM_WARNS = """
{{ config(materialized='dynamic_table', target_lag='1 minute', verify='full', verify_failure='warn') }}
select id, rand() as r from {{ source('raw', 'orders') }}
"""

# `checked` holds one value of `note` (NULL) in every file: the embedded engine answers this
# count from the Delta log's statistics (test_engine_conformance.py).
COUNTED = """
{{ config(materialized='dynamic_table', target_lag='1 minute', verify='full') }}
select note, count(*) as n from {{ ref('checked') }} group by note
"""

UNCHECKED = """
{{ config(materialized='dynamic_table', target_lag='1 minute') }}
select id, amount from {{ source('raw', 'orders') }}
"""

SCHEMA = (
    raw_sources("orders")
    + """\
models:
  - name: unchecked
    data_tests:
      - dynamic_table_matches_query
  - name: sampled
    data_tests:
      - dynamic_table_matches_query:
          mode: sample
"""
)


@pytest.fixture(scope="class")
def raw(project):
    schema = f"{project.test_schema}_raw"
    project.run_sql(f"create schema if not exists {schema}")
    project.run_sql(f"create table {schema}.orders (id bigint, amount double) using delta")
    project.run_sql(f"insert into {schema}.orders values " + ", ".join(f"({i}, {i}.5)" for i in range(40)))
    yield schema
    project.run_sql(f"drop schema if exists {schema} cascade")


def flat(text: str) -> str:
    return " ".join(text.split())


def last_column(table: str) -> str:
    """The text of a printed table's last column, its wrapped lines joined: flattening the whole
    table would interleave a long cell's lines with the other columns'."""
    return flat(" ".join(line.split("│")[-1] for line in table.splitlines() if "│" in line))


class TestVerify:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "checked.sql": CHECKED,
            "counted.sql": COUNTED,
            "sampled.sql": SAMPLED,
            "random.sql": RANDOM,
            "random_warns.sql": RANDOM_WARNS,
            "unchecked.sql": UNCHECKED,
            "schema.yml": SCHEMA,
        }

    def test_a_clean_refresh_verifies_equal(self, project, raw, dyntable_warehouse):
        run_dbt(["run", "--select", "checked", "sampled", "counted"])
        assert last(project, dyntable_warehouse, "checked").verified == "equal (full, 40 rows)"
        assert last(project, dyntable_warehouse, "counted").verified == "equal (full, 1 rows)"
        sampled = last(project, dyntable_warehouse, "sampled").verified
        assert sampled.startswith("equal (sample: bucket ") and " of 16 by id, " in sampled, sampled

        project.run_sql(f"insert into {raw}.orders values (40, 1.0), (3, 2.0)")
        project.run_sql(f"delete from {raw}.orders where id = 7")
        run_dbt(["run", "--select", "checked", "sampled", "counted"])
        assert last(project, dyntable_warehouse, "counted").verified == "equal (full, 1 rows)"
        row = assert_refreshed(project, dyntable_warehouse, "checked", ("INCREMENTAL", "FULL"))
        assert row.verified == "equal (full, 41 rows)"
        assert assert_refreshed(
            project, dyntable_warehouse, "sampled", ("INCREMENTAL", "FULL")
        ).verified.startswith("equal (sample")

        run_dbt(["run", "--select", "checked"])  # NO_DATA writes nothing: nothing to verify
        row = last(project, dyntable_warehouse, "checked")
        assert row.refresh_action == "NO_DATA" and row.verified is None

    def test_a_mismatch_fails_the_refresh(self, project, raw, dyntable_warehouse):
        _, log = run_dbt_and_capture(["run", "--select", "random"], expect_pass=False)
        text = flat(log)
        assert (
            f"Dynamic table {project.test_schema}.random (model random): the table does not equal its query"
            in text
        )
        assert (
            "MISMATCH (full): the table holds 41 rows, its query 41 (the same number of rows with different contents)"
            in text
        )
        assert "--full-refresh" in text
        row = last(project, dyntable_warehouse, "random")
        assert row.state == "FAILED" and row.verified.startswith("MISMATCH (full)")
        assert row.dt_version is not None  # the refresh committed: verify reports, it does not undo

    def test_a_mismatch_warns_when_configured(self, project, raw, dyntable_warehouse):
        _, log = run_dbt_and_capture(["run", "--select", "random_warns"])
        assert "does not equal its query" in flat(log)
        row = last(project, dyntable_warehouse, "random_warns")
        assert row.state == "SUCCEEDED" and row.verified.startswith("MISMATCH (full)")

    def test_the_runner_verifies_too(self, project, raw, dyntable_warehouse):
        project.run_sql(f"insert into {raw}.orders values (50, 5.0)")
        refreshed = dyntable(project, "refresh", "random")
        assert refreshed.exit_code == 1, refreshed.output
        row = last(project, dyntable_warehouse, "random")
        assert row.refresh_trigger == "MANUAL" and row.state == "FAILED"
        assert row.verified.startswith("MISMATCH (full)")
        assert dyntable(project, "refresh", "checked").exit_code == 0
        assert last(project, dyntable_warehouse, "checked").verified == "equal (full, 42 rows)"

    def test_dyntable_verify_and_the_generic_test(self, project, raw, dyntable_warehouse):
        run_dbt(["run", "--select", "unchecked", "sampled"])
        assert last(project, dyntable_warehouse, "unchecked").verified is None  # verify is opt-in
        ok = dyntable(project, "verify", "unchecked")
        assert ok.exit_code == 0, ok.output
        assert "equals its query" in ok.output and "equal (full, 42 rows)" in flat(ok.output)
        run_dbt(["test", "--select", "unchecked", "sampled"])

        # Rows written behind dbt-dyntable's back: the table no longer equals its query.
        project.run_sql(f"insert into {project.test_schema}.unchecked values (1000, 1.0)")
        bad = dyntable(project, "verify", "unchecked")
        assert bad.exit_code == 1
        assert "MISMATCH (full): the table holds 43 rows, its query 42 (different rows)" in flat(bad.output)
        assert "Run `dbt run --full-refresh -s unchecked` to rebuild it." in flat(bad.output)
        sample = dyntable(project, "verify", "unchecked", "--mode", "sample")
        # The sample is one bucket of rows by row key: it catches the foreign row when it falls in it.
        caught = "MISMATCH (sample: bucket " in flat(sample.output)
        assert (sample.exit_code, caught) in ((0, False), (1, True)), sample.output
        assert caught or "equal (sample: bucket " in flat(sample.output)
        results = run_dbt(["test", "--select", "unchecked"], expect_pass=False)
        assert [r.status for r in results] == ["fail"]
        assert results[0].failures == 1

        run_dbt(["run", "--select", "unchecked"])  # the refresh sees the foreign write and rebuilds
        assert_refreshed(project, dyntable_warehouse, "unchecked", "REINITIALIZE", "outside dbt-dyntable")
        assert dyntable(project, "verify", "unchecked").exit_code == 0
        run_dbt(["test", "--select", "unchecked"])

    def test_bad_mode_is_named(self, project, raw):
        bad = dyntable(project, "verify", "unchecked", "--mode", "some")
        assert bad.exit_code == 2 and "--mode 'some' is not one of sample, full." in flat(bad.output)

    def test_status_and_explain_show_verify(self, project, raw):
        status = flat(dyntable(project, "status").output)
        assert "full: equal at" in status and "full: MISMATCH at" in status and " off " in status
        explained = dyntable(project, "explain", "random_warns")
        assert explained.exit_code == 0
        assert "verify: full after each refresh that writes it (on a mismatch: a warning)" in explained.output
        history = last_column(dyntable(project, "history", "checked").output)
        assert "verify: equal (full, 41 rows)" in history, history


class TestBadVerifyConfig:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "bad_verify.sql": "{{ config(materialized='dynamic_table', target_lag='1 minute', verify='always') }} select 1 as id",
            "bad_failure.sql": "{{ config(materialized='dynamic_table', target_lag='1 minute', verify='full', verify_failure='ignore') }} select 1 as id",
        }

    def test_one_message_naming_model_and_values(self, project):
        _, log = run_dbt_and_capture(["run"], expect_pass=False)
        text = flat(log)
        assert "Model 'bad_verify': verify 'always' is not valid. Use sample | full." in text, text
        assert "Model 'bad_failure': verify_failure 'ignore' is not valid. Use error | warn." in text, text


IMMUTABLE = """
{{ config(materialized='dynamic_table', target_lag='1 minute', verify='full',
          immutable_where="day < current_date() - interval 2 days") }}
select day, count(*) as n from {{ source('raw', 'events') }} group by day
"""


class TestVerifyImmutable:
    """With `immutable_where` the table keeps rows its query no longer gives: verify compares the
    mutable region, as the contract says (docs/ARCHITECTURE.md, "Immutable rows")."""

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        return {"kept.sql": IMMUTABLE, "schema.yml": SCHEMA.replace("orders", "events").split("models:")[0]}

    @pytest.fixture(scope="class")
    def events(self, project):
        schema = f"{project.test_schema}_raw"
        project.run_sql(f"create schema if not exists {schema}")
        project.run_sql(f"create table {schema}.events (id bigint, day date) using delta")
        project.run_sql(
            f"insert into {schema}.events values (1, current_date() - interval 10 days), "
            f"(2, current_date() - interval 10 days), (3, current_date())"
        )
        yield schema
        project.run_sql(f"drop schema if exists {schema} cascade")

    def test_verify_compares_the_mutable_region(self, project, events, dyntable_warehouse):
        run_dbt(["run", "--select", "kept"])
        assert last(project, dyntable_warehouse, "kept").verified == "equal (full, mutable rows, 1 rows)"
        # The source drops its old day: the table keeps it, and still verifies equal.
        project.run_sql(f"delete from {events}.events where id < 3")
        project.run_sql(f"insert into {events}.events values (4, current_date())")
        run_dbt(["run", "--select", "kept"])
        row = last(project, dyntable_warehouse, "kept")
        assert row.state == "SUCCEEDED" and row.verified == "equal (full, mutable rows, 1 rows)", row
        old = project.run_sql(
            f"select n from {project.test_schema}.kept where day < current_date() - interval 2 days",
            fetch="all",
        )
        assert [tuple(r) for r in old] == [(2,)]
        assert dyntable(project, "verify", "kept").exit_code == 0
