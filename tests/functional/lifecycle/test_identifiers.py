"""Identifiers with spaces, quotes, backticks and non-ASCII letters: in column names, in model
aliases and in source names, a dynamic table either works like any other or is refused before
anything is created, with the model named; either way the warehouse stays usable."""

from __future__ import annotations

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from dbt.adapters.dyntable.dynamic_table.verify import check_dvs
from tests.functional.adapter.delta import delta_project
from tests.functional.dynamic_table.dvs import history, metadata, project_engine
from tests.functional.lifecycle.helpers import assert_refreshed
from tests.functional.sources import raw_sources

pytestmark = pytest.mark.jvm_ci

SOURCES = raw_sources("orders", "straße")

# Columns with a space, a backtick, a quote and non-ASCII letters, grouped and summed.
ODD_COLUMNS = """
{{ config(materialized='dynamic_table', target_lag='1 minute') }}
select `order kind`, `größe`, count(*) as `n of ``rows```, sum(`it's`) as `sum "it's"`
from {{ source('raw', 'orders') }}
group by `order kind`, `größe`
"""

SPACED_ALIAS = """
{{ config(materialized='dynamic_table', target_lag='1 minute', alias='order totals') }}
select `order kind`, count(*) as n from {{ source('raw', 'orders') }} group by `order kind`
"""

BACKTICK_ALIAS = """
{{ config(materialized='dynamic_table', target_lag='1 minute', alias='order`totals') }}
select `order kind`, count(*) as n from {{ source('raw', 'orders') }} group by `order kind`
"""

NON_ASCII_SOURCE = """
{{ config(materialized='dynamic_table', target_lag='1 minute') }}
select name, count(*) as n from {{ source('raw', 'straße') }} group by name
"""

DOWNSTREAM = """
{{ config(materialized='dynamic_table', target_lag='1 minute') }}
select `größe`, sum(`n of ``rows```) as total from {{ ref('odd_columns') }} group by `größe`
"""


@pytest.fixture(scope="class")
def raw(project):
    schema = f"{project.test_schema}_raw"
    project.run_sql(f"create schema if not exists {schema}")
    project.run_sql(
        f"create table {schema}.orders (`order kind` string, `größe` string, `it's` bigint) using delta"
    )
    project.run_sql(
        f"insert into {schema}.orders values ('a', 'groß', 1), ('b', 'klein', 2), ('a', 'groß', 3)"
    )
    project.run_sql(f"create table {schema}.`straße` (name string) using delta")
    project.run_sql(f"insert into {schema}.`straße` values ('x'), ('y')")
    yield schema
    project.run_sql(f"drop schema if exists {schema} cascade")


@pytest.mark.xfail_profile(
    "spark_session",
    reason="Delta on JVM Spark stores column names with a space or any of ,;{}()= only in tables with "
    "column mapping (delta.columnMapping.mode), which dbt-dyntable neither sets up for a dynamic table "
    "nor reads incrementally in a source: this test's raw table cannot even be created there",
)
class TestIdentifiers:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "sources.yml": SOURCES,
            "odd_columns.sql": ODD_COLUMNS,
            "spaced_alias.sql": SPACED_ALIAS,
            "backtick_alias.sql": BACKTICK_ALIAS,
            "non_ascii_source.sql": NON_ASCII_SOURCE,
            "downstream.sql": DOWNSTREAM,
        }

    def test_odd_column_names_refresh_like_any_other(self, project, raw, dyntable_warehouse):
        run_dbt(["run", "--select", "odd_columns", "downstream"])
        for model in ("odd_columns", "downstream"):
            assert_refreshed(project, dyntable_warehouse, model, "REINITIALIZE")
        project.run_sql(f"insert into {raw}.orders values ('c', 'groß', 5), ('a', 'klein', 7)")
        project.run_sql(f"delete from {raw}.orders where `it's` = 2")
        run_dbt(["run", "--select", "odd_columns", "downstream"])
        for model in ("odd_columns", "downstream"):
            assert_refreshed(project, dyntable_warehouse, model, ("INCREMENTAL", "FULL"))

    @pytest.mark.parametrize(
        "model, expected",
        [
            (
                "spaced_alias",
                "the dynamic table's name 'order totals' has characters other than letters, digits and "
                "underscores, which the embedded engine cannot store",
            ),
            ("backtick_alias", "Set alias='order_totals' in its config."),
        ],
    )
    def test_names_storage_cannot_hold_are_refused_before_anything_is_built(
        self, project, raw, model, expected
    ):
        for _ in range(2):  # and again: nothing was left half-built
            results, log = run_dbt_and_capture(["run", "--select", model], expect_pass=False)
            assert expected in " ".join(log.split())
            assert f"Model '{model}'" in log
        assert not [
            r
            for r in project.run_sql(f"show tables in {project.test_schema}", fetch="all")
            if "totals" in r[1]
        ]
        run_dbt(["run", "--select", "odd_columns"])  # the warehouse is as usable as before

    def test_a_source_named_with_non_ascii_letters(self, project, raw, dyntable_warehouse):
        escaped_paths = project_engine(project).capabilities.escaped_table_paths
        results, log = run_dbt_and_capture(["run", "--select", "non_ascii_source"], expect_pass=escaped_paths)
        if escaped_paths:
            assert_refreshed(project, dyntable_warehouse, "non_ascii_source", "REINITIALIZE")
        else:
            text = " ".join(log.split())
            assert f"Source {raw}.straße cannot be read incrementally by the embedded engine" in text, text[
                -2000:
            ]
            assert "Rename the table to letters, digits and underscores" in text


# A schema and aliases spelled with capitals, as a profile's `schema: Analytics` or a model's
# `alias='MyDT'` spells them.
MIXED_TABLE = """
{{ config(materialized='table', alias='MixedTable') }}
select 1 as id, 'a' as kind union all select 2 as id, 'b' as kind
"""

MIXED_DT = """
{{ config(materialized='dynamic_table', target_lag='1 minute', alias='MyDT', schema='Mixed') }}
select kind, count(*) as n from {{ ref('mixed_table') }} group by kind
"""

MIXED_VIEW = """
{{ config(materialized='view', alias='MixedView') }}
select kind, n from {{ ref('mixed_dt') }}
"""

READS_MIXED = """
{{ config(materialized='dynamic_table', target_lag='1 minute') }}
select sum(n) as total from {{ ref('mixed_view') }}
"""


class TestNamesDifferingInCase:
    """Spark resolves schema, table and view names case-insensitively: a name spelled with
    capitals is the same table in any case, in this process and the next, on either engine."""

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "mixed_table.sql": MIXED_TABLE,
            "mixed_dt.sql": MIXED_DT,
            "mixed_view.sql": MIXED_VIEW,
            "reads_mixed.sql": READS_MIXED,
        }

    def test_a_name_is_the_same_in_any_case(self, project, dyntable_warehouse):
        schema = f"{project.test_schema}_Mixed"
        run_dbt(["run"])
        for spelled in (f"{schema}.MyDT", f"{schema.lower()}.mydt", f"`{schema.upper()}`.`MYDT`"):
            rows = project.run_sql(f"select kind, n from {spelled}", fetch="all")
            assert sorted(tuple(r) for r in rows) == [("a", 1), ("b", 1)]
        assert (
            project.run_sql(f"select count(*) from {project.test_schema.upper()}.mixedtable", fetch="one")[0]
            == 2
        )
        assert project.run_sql(f"select count(*) from {project.test_schema}.MIXEDVIEW", fetch="one")[0] == 2
        project.run_sql(f"insert into {project.test_schema}.MixedTable values (3, 'a')")
        run_dbt(["run", "--select", "mixed_dt", "reads_mixed"])
        engine, store = project_engine(project), metadata(dyntable_warehouse)
        for name in (f"{schema}.mydt".lower(), f"{project.test_schema}.reads_mixed"):
            assert history(dyntable_warehouse, name)[-1].refresh_action in ("INCREMENTAL", "FULL"), name
            check = check_dvs(engine, store, name)
            assert check.ok, check.detail

    @pytest.mark.skip_profile(
        "spark_session", reason="re-attaching the catalog at start is the embedded engine's own"
    )
    def test_the_next_process_finds_them_as_spelled(self, project, dyntable_warehouse):
        from dbt.adapters.dyntable.engines.embedded import EmbeddedEngine

        schema = f"{project.test_schema}_Mixed"
        run_dbt(["run"])
        other = EmbeddedEngine(dyntable_warehouse).start()  # what the next dbt command starts
        try:
            listed = other.execute(f"show table extended in {schema} like '*'").collect()
            assert sorted(r["tableName"] for r in listed) == ["mydt"]
            assert len(other.execute(f"select * from {schema}.MyDT").collect()) == 2
            assert len(other.execute(f"select * from {project.test_schema}.MixedView").collect()) == 2
            assert other.table_location(schema, "MyDT") is not None
        finally:
            other.stop()
