"""Sources whose deletes and updates write deletion vectors (`delta.enableDeletionVectors`)
refresh incrementally: the rows a new vector masks are the deletes, read from its file alone
(docs/ARCHITECTURE.md, "Reading sources")."""

from __future__ import annotations

import pytest
from dbt.tests.util import run_dbt
from deltalake import DeltaTable

from tests.functional.adapter.delta import delta_project
from tests.functional.dynamic_table.dvs import project_engine
from tests.functional.lifecycle.helpers import assert_refreshed, location
from tests.functional.sources import raw_sources

BY_KIND = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}
select kind, count(*) as n, sum(amount) as total from {{ source('raw', 'events') }} group by kind
"""

PICKED = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}
select id, kind, amount from {{ source('raw', 'events') }} where amount > 3
"""

SOURCES = raw_sources("events")


@pytest.fixture(scope="class")
def raw(project):
    schema = f"{project.test_schema}_raw"
    project.run_sql(f"create schema if not exists {schema}")
    project.run_sql(
        f"create table {schema}.events (id bigint, kind string, amount double) using delta "
        "tblproperties ('delta.enableDeletionVectors' = 'true')"
    )
    project.run_sql(
        f"insert into {schema}.events values " + ", ".join(f"({i}, 'k{i % 3}', {i}.5)" for i in range(30))
    )
    yield schema
    project.run_sql(f"drop schema if exists {schema} cascade")


@pytest.mark.jvm_ci
class TestDeletionVectorSources:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        return {"by_kind.sql": BY_KIND, "picked.sql": PICKED, "sources.yml": SOURCES}

    def test_deletes_and_updates_through_vectors_refresh_incrementally(
        self, project, raw, dyntable_warehouse
    ):
        run_dbt(["run"])
        log = project_engine(project).delta_log(f"{raw}.events")
        assert log is not None and location(project, f"{raw}.events").is_dir()
        for change in (
            f"delete from {raw}.events where id in (4, 7, 20)",
            f"update {raw}.events set amount = 0.5 where id in (5, 6)",
            f"delete from {raw}.events where id in (8, 9) or kind = 'k2'",
        ):
            project.run_sql(change)
            latest = log.latest_version()
            assert bool(log.snapshot(latest).deleted_rows), change
            run_dbt(["run"])
            for model in ("by_kind", "picked"):
                assert_refreshed(project, dyntable_warehouse, model, "INCREMENTAL")

    def test_a_vector_on_a_compacted_file_is_read_as_deletes(self, project, raw, dyntable_warehouse):
        """A source compacted, then deleted from through a vector on the compacted file: the
        interval across both keeps the compaction (docs/ARCHITECTURE.md, "Reading sources")."""
        events = location(project, f"{raw}.events")
        # A first compaction purges the vectors earlier deletes wrote, so the next one rewrites
        # files without vectors.
        DeltaTable(str(events)).optimize.compact()
        run_dbt(["run"])
        project.run_sql(f"insert into {raw}.events values (100, 'k0', 9.5), (101, 'k1', 8.5)")
        DeltaTable(str(events)).optimize.compact()
        project.run_sql(f"delete from {raw}.events where id in (11, 100)")
        log = project_engine(project).delta_log(f"{raw}.events")
        assert log is not None
        latest = log.latest_version()
        assert bool(log.snapshot(latest).deleted_rows)
        run_dbt(["run"])
        for model in ("by_kind", "picked"):
            assert_refreshed(project, dyntable_warehouse, model, "INCREMENTAL")
