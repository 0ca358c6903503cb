"""Bad input gets one clear error naming the model and the fix, and leaves nothing half-built
or blocked for the other models."""

from __future__ import annotations

import pyarrow as pa
import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture, write_file
from deltalake import write_deltalake

from tests.functional.adapter.delta import delta_project
from tests.functional.dynamic_table.dvs import history
from tests.functional.lifecycle.helpers import assert_refreshed, location
from tests.functional.runner.test_runner import dyntable
from tests.functional.sources import raw_sources

pytestmark = pytest.mark.jvm_ci

GOOD = """
{{ config(materialized='dynamic_table', target_lag='1 minute') }}
select kind, count(*) as n from {{ source('raw', 'events') }} group by kind
"""

SOURCES = raw_sources("events")

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
}


@pytest.fixture(scope="class")
def raw(project):
    schema = f"{project.test_schema}_raw"
    project.run_sql(f"create schema if not exists {schema}")
    project.run_sql(f"create table {schema}.events (id bigint, kind string) using delta")
    project.run_sql(f"insert into {schema}.events values (1, 'a'), (2, 'b')")
    yield schema
    project.run_sql(f"drop schema if exists {schema} cascade")


class TestOneClearErrorPerBadModel:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        models = {"good.sql": GOOD, "sources.yml": SOURCES}
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
