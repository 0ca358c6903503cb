"""Schema evolution: of a dynamic table's own output, and of the sources it reads."""

from __future__ import annotations

import pyarrow as pa
import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture, write_file
from deltalake import DeltaTable, write_deltalake
from deltalake.schema import Field

from tests.functional.adapter.delta import delta_project
from tests.functional.lifecycle.helpers import assert_refreshed, location
from tests.functional.sources import raw_sources

pytestmark = pytest.mark.jvm_ci

SUMMARY = """
{{ config(materialized='dynamic_table', target_lag='1 minute'%s) }}
select kind, count(*) as n, sum(amount) as total from {{ source('raw', 'events') }} group by kind
"""

WIDER = """
{{ config(materialized='dynamic_table', target_lag='1 minute'%s) }}
select kind, count(*) as n, sum(amount) as total, max(id) as last_id, cast(min(amount) as string) as low
from {{ source('raw', 'events') }} group by kind
"""

PICKED = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}
select id, kind from {{ source('raw', 'events') }} where amount > 0
"""

KINDS = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}
select kind, count(*) as n from {{ source('raw', 'events') }} group by kind
"""

#: A `table` and an `incremental` model whose columns change (`%s`: before or after), and a DT
#: reading the table model's one lasting column.
TABLE_MODEL = {
    "before": "select id, kind, amount from {{ source('raw', 'events') }}",
    "after": "select id, concat('$', amount) as amount, 'new' as added from {{ source('raw', 'events') }}",
}
INCREMENTAL_MODEL = {
    "before": "select id from {{ source('raw', 'events') }}",
    "after": "select id, kind as added from {{ source('raw', 'events') }}",
}
READS_TABLE = """
{{ config(materialized='dynamic_table', target_lag='1 minute') }}
select id from {{ ref('table_model') }}
"""

SWITCHED = "select id, kind from {{ source('raw', 'events') }}"

SOURCES = raw_sources("events")


@pytest.fixture(scope="class")
def raw(project):
    schema = f"{project.test_schema}_raw"
    project.run_sql(f"create schema if not exists {schema}")
    project.run_sql(f"create table {schema}.events (id bigint, kind string, amount double) using delta")
    project.run_sql(f"insert into {schema}.events values (1, 'a', 1.0), (2, 'b', 2.0), (3, 'a', 3.0)")
    yield schema
    project.run_sql(f"drop schema if exists {schema} cascade")


def columns(project, model):
    return [
        c.name
        for c in project.adapter.get_columns_in_relation(
            project.adapter.Relation.create(schema=project.test_schema, identifier=model)
        )
    ]


class TestOutputSchemaEvolution:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "summary.sql": SUMMARY % "",
            "picked.sql": PICKED,
            "table_model.sql": "{{ config(materialized='table') }} " + TABLE_MODEL["before"],
            "incremental_model.sql": "{{ config(materialized='incremental') }} "
            + INCREMENTAL_MODEL["before"],
            "reads_table.sql": READS_TABLE,
            "switched.sql": "{{ config(materialized='view') }} " + SWITCHED,
            "sources.yml": SOURCES,
        }

    def test_a_view_turned_dynamic_table_replaces_the_view(self, project, raw, dyntable_warehouse):
        """dbt's materializations drop a relation of another type in their place; so does a DT."""
        run_dbt(["run", "--select", "switched"])
        dynamic = "{{ config(materialized='dynamic_table', target_lag='1 minute') }} " + SWITCHED
        write_file(dynamic, project.project_root, "models", "switched.sql")
        _, log = run_dbt_and_capture(["run", "--select", "switched"])
        assert f"{project.test_schema}.switched was a view; it was dropped and replaced" in " ".join(
            log.split()
        )
        assert_refreshed(project, dyntable_warehouse, "switched", "REINITIALIZE")

    def test_table_models_take_their_query_s_new_columns_in_place(self, project, raw, dyntable_warehouse):
        """A `table` model (and an `incremental` one under --full-refresh) whose query adds, retypes
        and drops columns is replaced with the query's schema, as CREATE OR REPLACE does on Delta:
        the same table, its history kept; a DT reading it rebuilds."""
        run_dbt(["run", "--select", "table_model", "incremental_model", "reads_table"])
        table = location(project, f"{project.test_schema}.table_model")
        built = DeltaTable(str(table)).version()
        write_file(
            "{{ config(materialized='table') }} " + TABLE_MODEL["after"],
            project.project_root,
            "models",
            "table_model.sql",
        )
        incremental = (
            "{{ config(materialized='incremental', full_refresh=true) }} " + INCREMENTAL_MODEL["after"]
        )
        write_file(incremental, project.project_root, "models", "incremental_model.sql")
        run_dbt(["run", "--select", "table_model", "incremental_model", "reads_table"])
        with project.adapter.connection_named("columns"):
            assert columns(project, "table_model") == ["id", "amount", "added"]
            assert columns(project, "incremental_model") == ["id", "added"]
        for model, query in (("table_model", TABLE_MODEL), ("incremental_model", INCREMENTAL_MODEL)):
            stored = project.run_sql(f"select * from {project.test_schema}.{model} order by id", fetch="all")
            wanted = project.run_sql(
                f"select * from ({query['after']}) q order by id".replace(
                    "{{ source('raw', 'events') }}", f"{raw}.events"
                ),
                fetch="all",
            )
            assert [tuple(r) for r in stored] == [tuple(r) for r in wanted], model
        assert DeltaTable(str(table)).version() > built  # replaced in place, not dropped and re-created
        # Embedded: "schema changed"; delta-spark's REPLACE also gives the table a new id: "re-created".
        source = f"{project.test_schema}.table_model:"
        assert_refreshed(project, dyntable_warehouse, "reads_table", "REINITIALIZE", source)

    def test_added_and_retyped_columns_rebuild_the_table(self, project, raw, dyntable_warehouse):
        run_dbt(["run", "--select", "summary"])
        assert_refreshed(project, dyntable_warehouse, "summary", "REINITIALIZE")
        write_file(WIDER % "", project.project_root, "models", "summary.sql")
        project.run_sql(f"insert into {raw}.events values (4, 'c', 4.0)")
        run_dbt(["run", "--select", "summary"])
        assert_refreshed(project, dyntable_warehouse, "summary", "REINITIALIZE", "definition changed")
        with project.adapter.connection_named("columns"):
            assert columns(project, "summary") == ["kind", "n", "total", "last_id", "low"]
        project.run_sql(f"update {raw}.events set amount = null where id = 4")  # NULLs fit every column
        run_dbt(["run", "--select", "summary"])
        assert_refreshed(project, dyntable_warehouse, "summary", ("INCREMENTAL", "FULL"))

    def test_fewer_columns_and_a_new_partitioning(self, project, raw, dyntable_warehouse):
        write_file(WIDER % "", project.project_root, "models", "summary.sql")
        run_dbt(["run", "--select", "summary"])
        write_file(SUMMARY % ", partition_by='kind'", project.project_root, "models", "summary.sql")
        run_dbt(["run", "--select", "summary"])
        assert_refreshed(project, dyntable_warehouse, "summary", "REINITIALIZE", "definition changed")
        table = DeltaTable(str(location(project, f"{project.test_schema}.summary")))
        assert table.metadata().partition_columns == ["kind"]
        assert [f.name for f in table.schema().fields] == ["kind", "n", "total"]

    def test_full_refresh_recovers_a_table_whose_data_files_are_gone(self, project, raw, dyntable_warehouse):
        run_dbt(["run", "--select", "summary"])
        for data_file in location(project, f"{project.test_schema}.summary").rglob("*.parquet"):
            data_file.unlink()
        run_dbt(["run", "--select", "summary", "--full-refresh"])
        assert_refreshed(project, dyntable_warehouse, "summary", "REINITIALIZE", "--full-refresh")


class TestSourceSchemaEvolution:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "summary.sql": SUMMARY % ", refresh_mode='incremental'",
            "picked.sql": PICKED,
            "sources.yml": SOURCES,
        }

    def test_a_source_gaining_a_column_rebuilds_with_the_source_and_column_named(
        self, project, raw, dyntable_warehouse
    ):
        run_dbt(["run"])
        events = location(project, f"{raw}.events")
        DeltaTable(str(events)).alter.add_columns([Field.from_arrow(pa.field("channel", pa.string()))])
        project.run_sql(f"insert into {raw}.events values (5, 'a', 5.0, 'web')")
        run_dbt(["run"])
        for model in ("summary", "picked"):
            assert_refreshed(
                project,
                dyntable_warehouse,
                model,
                "REINITIALIZE",
                f"{raw}.events:",
                "schema changed",
                "added channel",
            )
        project.run_sql(f"insert into {raw}.events values (6, 'b', 6.0, 'shop')")
        run_dbt(["run"])
        assert_refreshed(project, dyntable_warehouse, "summary", "INCREMENTAL")


class TestSourceLosingAColumn:
    """A source rebuilt without a column (a `table` model or an outside writer renaming `amount`):
    DTs not reading it rebuild, DTs reading it fail with one message naming them and the column,
    and each is right again once its SQL follows the rename."""

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "summary.sql": SUMMARY % ", refresh_mode='incremental'",
            "picked.sql": PICKED,
            "kinds.sql": KINDS,
            "sources.yml": SOURCES,
        }

    def test_readers_of_the_column_fail_by_name_the_others_rebuild(self, project, raw, dyntable_warehouse):
        run_dbt(["run"])
        events = location(project, f"{raw}.events")
        renamed = pa.table(
            {
                "id": pa.array([1, 2, 3, 7], pa.int64()),
                "kind": ["a", "b", "a", "d"],
                "value": pa.array([1.0, 2.0, 3.0, 7.0], pa.float64()),
            }
        )
        write_deltalake(str(events), renamed, mode="overwrite", schema_mode="overwrite")
        results = run_dbt(["run"], expect_pass=False)
        by_model = {r.node.name: r for r in results}
        assert by_model["kinds"].status == "success"
        assert_refreshed(
            project, dyntable_warehouse, "kinds", "REINITIALIZE", f"{raw}.events:", "schema changed"
        )
        for model in ("summary", "picked"):
            assert by_model[model].status == "error"
            message = by_model[model].message
            assert model in message and "amount" in message, message
            assert "Traceback" not in message and "ObjectName" not in message, message

        write_file(
            SUMMARY.replace("amount", "value") % ", refresh_mode='incremental'",
            project.project_root,
            "models",
            "summary.sql",
        )
        write_file(PICKED.replace("amount", "value"), project.project_root, "models", "picked.sql")
        run_dbt(["run"])
        for model in ("summary", "picked"):
            assert_refreshed(project, dyntable_warehouse, model, "REINITIALIZE")
        project.run_sql(f"insert into {raw}.events values (8, 'a', 8.0)")
        run_dbt(["run"])
        for model in ("summary", "picked", "kinds"):
            assert_refreshed(project, dyntable_warehouse, model, "INCREMENTAL")


@pytest.mark.skip_profile("spark_session", reason="re-attaching tables at start is the embedded engine's own")
class TestPartitionedDynamicTableReattaches:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        return {"summary.sql": SUMMARY % ", partition_by='kind'", "sources.yml": SOURCES}

    def test_a_new_process_reads_and_lists_it(self, project, raw, dyntable_warehouse):
        from dbt.adapters.dyntable.engines.embedded import EmbeddedEngine

        run_dbt(["run"])
        assert_refreshed(project, dyntable_warehouse, "summary", "REINITIALIZE")
        other = EmbeddedEngine(dyntable_warehouse).start()  # what the next dbt command starts
        try:
            rows = other.execute(f"select kind, n from {project.test_schema}.summary order by kind").collect()
            assert [tuple(r) for r in rows] == [("a", 2), ("b", 1)]
        finally:
            other.stop()
        with project.adapter.connection_named("columns"):
            assert columns(project, "summary") == ["kind", "n", "total"]
