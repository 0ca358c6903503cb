"""A damaged metadata table never stops the dynamic tables (docs/ARCHITECTURE.md, "Metadata
tables"): a refresh that meets the damage repairs the table and warns, naming `dyntable repair`;
what a refresh does not read (the history it only appends to) `dyntable repair` rebuilds; the
commands that only read name the table and the way out. The DTs equal their queries afterwards.
The audit's damage, to every metadata table at once: a corrupt checkpoint, a truncated newest
commit, missing data files; and a log removed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture
from deltalake import DeltaTable, write_deltalake

from dbt.adapters.dyntable.dynamic_table.metadata import FRONTIERS, GRAPH_HISTORY, REFRESH_HISTORY, SCHEMAS
from tests.functional.adapter.delta import delta_project
from tests.functional.dynamic_table.dvs import assert_dvs
from tests.functional.lifecycle.helpers import (
    TOTALS,
    as_a_new_process,
    checkpoint,
    commits,
    raw_events,
    remove_with_checksum,
)
from tests.functional.runner.test_runner import dyntable
from tests.functional.sources import raw_sources

pytestmark = pytest.mark.jvm_ci

KINDS = "{{ config(materialized='table') }} select distinct kind from {{ source('raw', 'events') }}"

SOURCES = raw_sources("events")
TABLES = (FRONTIERS, REFRESH_HISTORY, GRAPH_HISTORY)


def corrupt_checkpoint(table: Path) -> None:
    version = checkpoint(table)
    (table / "_delta_log" / f"{version:020d}.checkpoint.parquet").write_bytes(os.urandom(200))


def truncated_commit(table: Path) -> None:
    """The newest commit cut in half, past the latest checkpoint (a reader replays it)."""
    empty = pa.Table.from_pylist([], schema=SCHEMAS[table.name])
    write_deltalake(str(table), empty, mode="append")  # a commit no checkpoint covers yet
    newest = commits(table)[-1]
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])


def missing_data_files(table: Path) -> None:
    for uri in DeltaTable(str(table)).file_uris():
        remove_with_checksum(Path(uri.removeprefix("file://")))


def no_log(table: Path) -> None:
    shutil.rmtree(table / "_delta_log")


DAMAGE = {
    "corrupt checkpoint": corrupt_checkpoint,
    "truncated commit": truncated_commit,
    "missing data files": missing_data_files,
    "log removed": no_log,
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
        yield from raw_events(project)


class TestDamagedMetadata(DamagedMetadataProject):
    @pytest.mark.parametrize("damage", sorted(DAMAGE))
    def test_refreshes_repair_what_they_meet_and_dyntable_repair_the_rest(
        self, project, raw, dyntable_warehouse, damage
    ):
        meta = dyntable_warehouse / f"{project.test_schema}_meta"
        run_dbt(["run"])
        project.run_sql(f"insert into {raw}.events values (3, 'a')")
        run_dbt(["run"])
        for table in TABLES:
            DAMAGE[damage](meta / table)
        as_a_new_process(project)
        status = dyntable(project, "status")  # reads only: names the damage and the way out
        assert status.exit_code == 1 and f"The metadata table {project.test_schema}_meta." in status.stderr
        assert "dyntable repair" in status.stderr and "Traceback" not in status.output

        project.run_sql(f"insert into {raw}.events values (4, 'c')")
        _, log = run_dbt_and_capture(["run"])  # every model runs
        text = " ".join(log.split())
        for table in (FRONTIERS, GRAPH_HISTORY):  # what every refresh reads: repaired, with a warning
            assert f"The metadata table {project.test_schema}_meta.{table} was damaged (" in text, text[
                -3000:
            ]
        assert "`dyntable repair` checks every metadata table" in text
        assert_dvs(project, dyntable_warehouse, "totals", f"{project.test_schema}_meta")

        repaired = dyntable(project, "repair")  # the history, which refreshes only append to
        assert repaired.exit_code == 0, repaired.output
        assert dyntable(project, "status").exit_code == 0
        as_a_new_process(project)
        run_dbt(["run"])
        assert_dvs(project, dyntable_warehouse, "totals", f"{project.test_schema}_meta")


@pytest.mark.skip_profile(
    "spark_session", reason="the embedded engine re-attaches every table when it starts"
)
class TestDamagedMetadataAtEngineStart(DamagedMetadataProject):
    """A new process starts its engine over the damaged warehouse: it starts, repairs the table
    and says so, where it used to exit with a backtrace before running anything."""

    def test_a_new_process_starts_and_repairs_the_damage(self, project, raw, dyntable_warehouse):
        meta = dyntable_warehouse / f"{project.test_schema}_meta"
        run_dbt(["run"])
        truncated_commit(meta / FRONTIERS)
        command = ["--project-dir", str(project.project_root), "--profiles-dir", str(project.profiles_dir)]
        dbt_run = subprocess.run(
            [sys.executable, "-m", "dbt.cli.main", "run", *command],
            capture_output=True,
            text=True,
            timeout=300,
        )
        output = " ".join((dbt_run.stdout + dbt_run.stderr).split())
        assert dbt_run.returncode == 0, output[-3000:]
        assert f"The metadata table {project.test_schema}_meta.{FRONTIERS} was damaged (" in output, output[
            -3000:
        ]
        assert "PASS=2" in output and "Traceback" not in output and "panicked" not in output
        assert (meta / ".damaged").is_dir()
