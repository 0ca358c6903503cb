"""Bad input gets one clear error naming the model and the fix, and leaves nothing half-built
or blocked for the other models."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture, write_file
from deltalake import write_deltalake

from tests.functional.adapter.delta import delta_project
from tests.functional.dynamic_table.dvs import history, project_engine
from tests.functional.lifecycle.helpers import assert_refreshed, location, raw_events
from tests.functional.runner.test_runner import dyntable
from tests.functional.sources import raw_sources

pytestmark = pytest.mark.jvm_ci

GOOD = """
{{ config(materialized='dynamic_table', target_lag='1 minute') }}
select kind, count(*) as n from {{ source('raw', 'events') }} group by kind
"""

SOURCES = raw_sources("events")

#: A bigint column UNION ALL a string column: Spark gives strings.
UNION = "select id as code from {{ source('raw', 'events') }} union all select kind as code from {{ source('raw', 'events') }}"
#: Tables built without `file_format` (a project that does not set it) and as parquet, each read
#: by a DT.
FORMATS = {
    "no_format": "{{ config(materialized='table', file_format=none) }} select 1 as id",
    "parquet_table": "{{ config(materialized='table', file_format='parquet') }} select 1 as id",
    "over_no_format": "{{ config(materialized='dynamic_table', target_lag='1 minute') }} select id from {{ ref('no_format') }}",
    "over_parquet": "{{ config(materialized='dynamic_table', target_lag='1 minute') }} select id from {{ ref('parquet_table') }}",
}
UNIONS = {
    "union_dt": "{{ config(materialized='dynamic_table', target_lag='1 minute') }} " + UNION,
    "union_table": "{{ config(materialized='table') }} " + UNION,
}

BAD = {
    "missing_key": (
        "{{ config(materialized='dynamic_table', target_lag='1 minute', unique_key='order_id') }}"
        " select kind, count(*) as n from {{ source('raw', 'events') }} group by kind",
        ["(model missing_key): unique_key order_id is not a column of its query (its columns: kind, n)"],
    ),
    "bare_null": (
        "{{ config(materialized='dynamic_table', target_lag='1 minute') }}"
        " select kind, null as note from {{ source('raw', 'events') }}",
        ["(model bare_null): column note has no type", "cast(null as string) as note"],
    ),
    "syntax": (
        "{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}"
        " select kind from {{ source('raw', 'events') }} where",
        ["(model syntax)", "syntax error at line 1", "the WHERE clause is incomplete"],
    ),
    # A column of immutable_where the query lacks: the engine's words would name no config key.
    "bad_immutable": (
        "{{ config(materialized='dynamic_table', target_lag='1 minute', immutable_where='closed_at < current_date()') }}"
        " select kind, count(*) as n from {{ source('raw', 'events') }} group by kind",
        [
            "(model bad_immutable): immutable_where closed_at < current_date() names closed_at, which "
            "is not a column of its query (its columns: kind, n). Fix immutable_where or the query."
        ],
    ),
    # A partition column that is no column, written to break out of its quotes: named as a column.
    "hostile_partition": (
        "{{ config(materialized='dynamic_table', target_lag='1 minute',"
        " partition_by=['kind`) using delta; drop table x; --']) }}"
        " select kind, count(*) as n from {{ source('raw', 'events') }} group by kind",
        [
            "(model hostile_partition): partition_by kind`) using delta; drop table x; -- is not a "
            "column of its query (its columns: kind, n). Fix partition_by or the query."
        ],
    ),
}
#: Keys misspelled, beside dbt's own: the DT is built, and the misspelled keys are named.
MISSPELLED = (
    "{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mod='full', uniqe_key='kind',"
    " tags=['nightly'], meta={'owner': 'x'}, persist_docs={'relation': true}) }}"
    " select kind, count(*) as n from {{ source('raw', 'events') }} group by kind"
)


@pytest.fixture(scope="class")
def raw(project):
    yield from raw_events(project)


class TestOneClearErrorPerBadModel:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        models = {"good.sql": GOOD, "sources.yml": SOURCES, "misspelled.sql": MISSPELLED}
        models.update({f"{name}.sql": sql for name, sql in UNIONS.items()})
        models.update({f"{name}.sql": sql for name, sql in FORMATS.items()})
        models.update({f"{name}.sql": sql for name, (sql, _) in BAD.items()})
        return models

    @pytest.mark.parametrize("model", sorted(BAD))
    def test_the_error_names_the_model_and_the_fix_and_nothing_is_created(
        self, project, raw, dyntable_warehouse, model
    ):
        _, log = run_dbt_and_capture(["run", "--select", model], expect_pass=False)
        text = " ".join(log.split())
        for expected in BAD[model][1]:
            assert expected in text, text[-3000:]
        # The DT and its model are named once, before the error's own words.
        named = f"Dynamic table {project.test_schema}.{model} (model {model}): "
        assert named in text and f"{named}Model '" not in text and f"{named}Dynamic table" not in text
        assert project.run_sql(f"show tables in {project.test_schema} like '{model}'", fetch="all") == []
        [failed] = history(dyntable_warehouse, f"{project.test_schema}.{model}")[-1:]
        assert failed.state == "FAILED" and failed.refresh_action in ("REINITIALIZE", None)

    def test_a_union_of_a_number_and_a_text_column_holds_text_or_fails_clearly(self, project, raw):
        """Sail types such a UNION as its first branch (bigint) and its rows as strings, which a
        table stored as NULL: the embedded engine refuses it, naming the cast that fixes it."""
        embedded = project_engine(project).name == "embedded"
        _, log = run_dbt_and_capture(["run", "--select", *UNIONS], expect_pass=not embedded)
        for model in UNIONS:
            if embedded:
                text = " ".join(log.split())
                assert f"model {model}" in text and "e.g. cast(code as string) as code" in text, text[-3000:]
                assert (
                    project.run_sql(f"show tables in {project.test_schema} like '{model}'", fetch="all") == []
                )
            else:
                stored = project.run_sql(f"select code from {project.test_schema}.{model}", fetch="all")
                assert sorted(r[0] for r in stored) == ["1", "2", "a", "b"]

    def test_tables_are_delta_unless_told_otherwise_and_another_format_names_the_fix(
        self, project, raw, dyntable_warehouse
    ):
        """dbt-spark builds a table without `file_format` as the session's default format: Delta,
        which DTs read and the embedded engine re-attaches. A parquet table is refused by the
        embedded engine, and a DT reading one on JVM Spark names `file_format: delta`."""
        engine = project_engine(project)
        run_dbt(["run", "--select", "no_format", "over_no_format"])
        assert engine.delta_log(f"{project.test_schema}.no_format") is not None
        assert_refreshed(project, dyntable_warehouse, "over_no_format", "REINITIALIZE")
        _, log = run_dbt_and_capture(["run", "--select", "parquet_table", "over_parquet"], expect_pass=False)
        text = " ".join(log.split())
        if engine.name == "embedded":
            assert "would be stored as parquet: the embedded engine keeps Delta tables only" in text, text[
                -3000:
            ]
        else:
            assert f"Source {project.test_schema}.parquet_table is not a Delta table" in text, text[-3000:]
        assert "(`+file_format: delta` for models, seeds and snapshots in dbt_project.yml)" in text
        assert project.run_sql(f"show tables in {project.test_schema} like 'over_parquet'", fetch="all") == []

    def test_an_engine_failure_names_what_the_refresh_ran_and_the_fix(self, project, raw):
        """An error only the engine meets, running the query: the message says which statement
        failed and the fix, the engine's words after."""
        model = (
            "{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='full') }} "
            "select kind, case when kind = 'zzz' then 1 else raise_error('boom at run time') end as x "
            "from {{ source('raw', 'events') }}"
        )
        write_file(model, project.project_root, "models", "boom.sql")
        _, log = run_dbt_and_capture(["run", "--select", "boom"], expect_pass=False)
        text = " ".join(log.split())
        assert (
            f"Dynamic table {project.test_schema}.boom (model boom): recomputing it failed running its "
            "query with each source read at the version observed; the query is the model's own: "
            "`dbt show --select boom` runs it as it stands"
        ) in text, text[-3000:]
        assert "The engine said: " in text and "boom at run time" in text

    def test_an_immutable_where_changed_to_a_column_the_query_lacks_names_the_key(self, project, raw):
        """A changed immutable_where applies at the next refresh, an incremental one: the engine
        fails filtering the delta, and the error names the key, not only the engine's column."""
        model = (
            "{{{{ config(materialized='dynamic_table', target_lag='1 minute', immutable_where='{}') }}}} "
            "select kind, count(*) as n from {{{{ source('raw', 'events') }}}} group by kind"
        )
        write_file(model.format("n > 100"), project.project_root, "models", "kept.sql")
        run_dbt(["run", "--select", "kept"])
        write_file(model.format("closed_at < current_date()"), project.project_root, "models", "kept.sql")
        project.run_sql(f"insert into {raw}.events values (50, 'a')")
        _, log = run_dbt_and_capture(["run", "--select", "kept"], expect_pass=False)
        text = " ".join(log.split())
        assert (
            "(model kept): immutable_where closed_at < current_date() names closed_at, which is not a "
            "column of its query (its columns: kind, n). Fix immutable_where or the query."
        ) in text, text[-3000:]
        os.remove(os.path.join(project.project_root, "models", "kept.sql"))  # the others run every model

    def test_misspelled_config_keys_warn_naming_the_closest_known_key(self, project, raw):
        _, log = run_dbt_and_capture(["run", "--select", "misspelled"])
        text = " ".join(log.split())
        unknown = "Model 'misspelled': config key '{}' is not one dbt-dyntable or dbt knows, and is ignored"
        assert f"{unknown.format('refresh_mod')} (did you mean 'refresh_mode'?)" in text, text[-3000:]
        assert f"{unknown.format('uniqe_key')} (did you mean 'unique_key'?)" in text
        assert text.count("is not one dbt-dyntable or dbt knows") == 2  # tags, meta, persist_docs: dbt's
        status = " ".join(dyntable(project, "status").output.split())
        assert f"{unknown.format('refresh_mod')} (did you mean 'refresh_mode'?)" in status, status[-3000:]

    def test_bad_models_do_not_stop_the_others(self, project, raw, dyntable_warehouse):
        run_dbt(["run"], expect_pass=False)
        assert_refreshed(project, dyntable_warehouse, "good", "REINITIALIZE")
        project.run_sql(f"insert into {raw}.events values (3, 'a')")
        with open(f"{project.project_root}/models/bad_config.sql", "w") as handle:
            handle.write("{{ config(materialized='dynamic_table', target_lag='5 minuts') }} select 1 as x")
        status = dyntable(project, "status")
        assert status.exit_code == 0, status.output
        assert "Not loaded" in status.output and "bad_config" in status.output and "good" in status.output
        once = dyntable(project, "run", "--once")
        assert once.exit_code == 1, once.output  # it ran the others, and says some were not loaded
        assert "target_lag '5 minuts' is not valid" in " ".join(once.output.split())
        assert_refreshed(project, dyntable_warehouse, "good", ("INCREMENTAL", "FULL"))

    def test_a_source_that_lost_a_column_the_query_reads(self, project, raw, dyntable_warehouse):
        """The rebuild its schema change causes fails in the engine: the error names the source,
        the change and the fix, which is the model's (docs/ARCHITECTURE.md, "Reading sources")."""
        project.run_sql(f"create table {raw}.orders (id bigint, amount double) using delta")
        project.run_sql(f"insert into {raw}.orders values (1, 1.5), (2, 2.5)")
        model = "{{ config(materialized='dynamic_table', target_lag='1 minute') }} "
        write_file(
            model + f"select id, amount from {raw}.orders", project.project_root, "models", "spend.sql"
        )
        run_dbt(["run", "--select", "spend"])
        dropped = pa.table({"id": pa.array([1, 2], pa.int64())})
        write_deltalake(
            location(project, f"{raw}.orders"), dropped, mode="overwrite", schema_mode="overwrite"
        )
        _, log = run_dbt_and_capture(["run", "--select", "spend"], expect_pass=False)
        text = " ".join(log.split())
        assert (
            f"Dynamic table {project.test_schema}.spend (model spend): its query no longer runs on its "
            f"sources, whose columns changed: {raw}.orders (dropped amount). The engine said: "
        ) in text, text[-3000:]
        assert "Fix the model's query for the new columns and run it again" in text
        [failed] = history(dyntable_warehouse, f"{project.test_schema}.spend")[-1:]
        assert failed.state == "FAILED" and "(dropped amount)" in (failed.state_message or "")
