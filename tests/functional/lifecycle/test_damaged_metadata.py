"""A damaged metadata table gives one message naming it and the way out, and `dyntable repair`
recovers: the dynamic tables then equal their queries again (docs/ARCHITECTURE.md, "Metadata")."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from dbt.adapters.dyntable.dynamic_table.metadata import FRONTIERS, GRAPH_HISTORY, REFRESH_HISTORY
from tests.functional.adapter.delta import delta_project
from tests.functional.dynamic_table.dvs import assert_dvs
from tests.functional.lifecycle.helpers import as_a_new_process, commits
from tests.functional.runner.test_runner import dyntable
from tests.functional.sources import raw_sources

pytestmark = pytest.mark.jvm_ci

TOTALS = """
{{ config(materialized='dynamic_table', target_lag='1 minute') }}
select kind, count(*) as n from {{ source('raw', 'events') }} group by kind
"""

KINDS = "{{ config(materialized='table') }} select distinct kind from {{ source('raw', 'events') }}"

SOURCES = raw_sources("events")


def garbage_newest_commit(table: Path) -> None:
    commits(table)[-1].write_text("{not json\n")


def garbage_data_files(table: Path) -> None:
    for data in table.glob("*.parquet"):
        data.write_bytes(b"PAR1 not really parquet")


def no_log(table: Path) -> None:
    shutil.rmtree(table / "_delta_log")


#: How each table is damaged, and whether a refresh reads it (the history is only appended to).
DAMAGE = {
    "frontiers, newest commit": (FRONTIERS, garbage_newest_commit, True),
    "history, data files": (REFRESH_HISTORY, garbage_data_files, False),
    "graph, log removed": (GRAPH_HISTORY, no_log, True),
}


class DamagedMetadataProject:
    """A DT and a table model over one source, with a metadata schema of their own."""

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def dbt_profile_data(self, unique_schema, dbt_profile_target):
        # A metadata schema of its own: the damage must not reach the session's other tests.
        target = {**dbt_profile_target, "schema": unique_schema, "metadata_schema": f"{unique_schema}_meta"}
        return {"test": {"outputs": {"default": target}, "target": "default"}}

    @pytest.fixture(scope="class")
    def models(self):
        return {"totals.sql": TOTALS, "kinds.sql": KINDS, "sources.yml": SOURCES}

    @pytest.fixture(scope="class")
    def raw(self, project):
        schema = f"{project.test_schema}_raw"
        project.run_sql(f"create schema if not exists {schema}")
        project.run_sql(f"create table {schema}.events (id bigint, kind string) using delta")
        project.run_sql(f"insert into {schema}.events values (1, 'a'), (2, 'b')")
        yield schema
        project.run_sql(f"drop schema if exists {schema} cascade")


class TestDamagedMetadata(DamagedMetadataProject):
    @pytest.mark.parametrize("damage", sorted(DAMAGE))
    def test_one_message_then_repair_recovers(self, project, raw, dyntable_warehouse, damage):
        meta = dyntable_warehouse / f"{project.test_schema}_meta"
        run_dbt(["run"])
        project.run_sql(f"insert into {raw}.events values (3, 'a')")
        run_dbt(["run"])
        table, damaging, read_by_refreshes = DAMAGE[damage]
        damaging(meta / table)
        as_a_new_process(project)
        named = f"The metadata table {project.test_schema}_meta.{table} ("
        status = dyntable(project, "status")
        assert status.exit_code == 1 and named in status.stderr and "dyntable repair" in status.stderr
        assert "Traceback" not in status.output

        project.run_sql(f"insert into {raw}.events values (4, 'c')")
        results, log = run_dbt_and_capture(["run"], expect_pass=not read_by_refreshes)
        by_model = {r.node.name: r for r in results}
        assert by_model["kinds"].status == "success"
        if read_by_refreshes:
            assert by_model["totals"].status == "error"
            assert named in " ".join(log.split()) and "dyntable repair" in log

        repaired = dyntable(project, "repair")
        assert repaired.exit_code == 0, repaired.output
        assert "rebuilt" in repaired.output and table in repaired.output.replace("\n", "")
        assert (meta / ".damaged").is_dir()
        as_a_new_process(project)
        run_dbt(["run"])
        assert_dvs(project, dyntable_warehouse, "totals", f"{project.test_schema}_meta")
        assert dyntable(project, "status").exit_code == 0


@pytest.mark.skip_profile(
    "spark_session", reason="the embedded engine re-attaches every table when it starts"
)
class TestDamagedMetadataAtEngineStart(DamagedMetadataProject):
    """A new process starts its engine over the damaged warehouse: it starts, and says what is
    damaged, where it used to exit with a backtrace before running anything."""

    def test_a_new_process_starts_and_names_the_damage(self, project, raw, dyntable_warehouse):
        meta = dyntable_warehouse / f"{project.test_schema}_meta"
        run_dbt(["run"])
        garbage_newest_commit(meta / FRONTIERS)
        command = ["--project-dir", str(project.project_root), "--profiles-dir", str(project.profiles_dir)]
        dbt_run = subprocess.run(
            [sys.executable, "-m", "dbt.cli.main", "run", *command],
            capture_output=True,
            text=True,
            timeout=300,
        )
        output = " ".join((dbt_run.stdout + dbt_run.stderr).split())
        assert dbt_run.returncode == 1, output[-3000:]
        assert f"The metadata table {project.test_schema}_meta.{FRONTIERS} (" in output, output[-3000:]
        assert "PASS=1" in output and "ERROR=1" in output, output[-3000:]
        assert "Traceback" not in output and "panicked" not in output
        repaired = subprocess.run(
            [sys.executable, "-m", "dbt.adapters.dyntable.cli", "repair", *command],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert repaired.returncode == 0 and "rebuilt" in repaired.stdout, repaired.stdout + repaired.stderr
        again = subprocess.run(
            [sys.executable, "-m", "dbt.cli.main", "run", *command],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert again.returncode == 0, again.stdout[-3000:]
