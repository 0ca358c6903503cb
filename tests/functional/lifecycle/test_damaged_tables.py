"""A dynamic table whose own files are damaged (docs/ARCHITECTURE.md, "Damage"): `dyntable repair`
finds it and names the command that fixes it, a refresh that meets it names the table, what is
damaged and that command, the other models run, and `dbt run --full-refresh` rebuilds it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Dict

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture
from deltalake import DeltaTable

from dbt.adapters.dyntable.table_damage import damage as damage_of
from tests.functional.dynamic_table.dvs import assert_dvs
from tests.functional.lifecycle.helpers import (
    TOTALS,
    EventsProject,
    checkpoint,
    commits,
    forget_delta_logs,
    last,
    location,
    remove_with_checksum,
)
from tests.functional.runner.test_runner import dyntable
from tests.functional.sources import raw_sources

KINDS = "{{ config(materialized='table') }} select distinct kind from {{ source('raw', 'events') }}"


def newest_checkpoint(table: Path) -> Path:
    return sorted((table / "_delta_log").glob("*.checkpoint.parquet"))[-1]


def corrupt_checkpoint(table: Path) -> None:
    newest_checkpoint(table).write_bytes(os.urandom(200))


def missing_checkpoint(table: Path) -> None:
    remove_with_checksum(newest_checkpoint(table))


def truncated_commit(table: Path) -> None:
    newest = commits(table)[-1]
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])


def missing_commit(table: Path) -> None:
    after = int(newest_checkpoint(table).name.split(".")[0]) + 1
    remove_with_checksum(table / "_delta_log" / f"{after:020d}.json")


def missing_data_files(table: Path) -> None:
    for uri in DeltaTable(str(table)).file_uris():
        remove_with_checksum(Path(uri.removeprefix("file://")))


#: How the DT is damaged, and the words `dyntable repair` and the failed refresh say of it.
DAMAGE: Dict[str, tuple[Callable[[Path], None], str]] = {
    "corrupt checkpoint": (corrupt_checkpoint, "is corrupt"),
    "missing checkpoint": (missing_checkpoint, "which _last_checkpoint names, is missing"),
    "truncated commit": (truncated_commit, "is truncated or corrupt"),
    "missing commit": (missing_commit, "is missing (a reader replays every commit after"),
    "missing data files": (missing_data_files, "data files its latest version lists are missing"),
}


#: The JVM suite's CI subset: the audit's three kinds (the others differ only in what is gone).
IN_JVM_CI = {"corrupt checkpoint", "truncated commit", "missing data files"}


class TestDamagedDynamicTable(EventsProject):
    @pytest.fixture(scope="class")
    def models(self):
        return {"totals.sql": TOTALS, "kinds.sql": KINDS, "sources.yml": raw_sources("events")}

    @pytest.mark.parametrize(
        "damage",
        [pytest.param(d, marks=[pytest.mark.jvm_ci] if d in IN_JVM_CI else []) for d in sorted(DAMAGE)],
    )
    def test_named_by_repair_and_the_refresh_then_rebuilt_by_full_refresh(
        self, project, raw, dyntable_warehouse, damage
    ):
        damaging, said = DAMAGE[damage]
        run_dbt(["run"])  # built (one commit on JVM Spark, two on the embedded engine) or refreshed
        table = location(project, f"{project.test_schema}.totals")
        if len(commits(table)) == 1:
            # The checkpoint goes at the version before the latest: the DT needs a second one.
            project.run_sql(f"insert into {raw}.events values (9, 'b')")
            run_dbt(["run"])
        checkpoint(table, before_latest=True)
        project.run_sql(f"insert into {raw}.events values (10, 'c')")
        run_dbt(["run"])  # two commits after the checkpoint
        damaging(table)
        forget_delta_logs(project)

        repair = dyntable(project, "repair")
        text = " ".join(repair.output.split())
        assert repair.exit_code == 1, text
        fix = "dbt run --full-refresh --select totals"
        assert f"{project.test_schema}.totals" in text and said in text and fix in text, text

        project.run_sql(f"insert into {raw}.events values (12, 'a')")
        results, log = run_dbt_and_capture(["run"], expect_pass=False)
        by_model = {r.node.name: r for r in results}
        assert by_model["kinds"].status == "success"
        assert by_model["totals"].status == "error"
        text = " ".join(log.split())
        assert "(model totals): its table is damaged: " in text and said in text and fix in text, text

        run_dbt(["run", "--full-refresh", "--select", "totals"])
        rebuilt = last(project, dyntable_warehouse, "totals")
        assert rebuilt.refresh_action == "REINITIALIZE" and "its table was damaged" in rebuilt.reason
        assert_dvs(project, dyntable_warehouse, "totals")
        assert damage_of(str(location(project, f"{project.test_schema}.totals"))) is None
