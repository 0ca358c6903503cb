"""A dynamic table's data timestamp never goes back, whoever refreshes it (docs/ARCHITECTURE.md,
"Exactly once"): the runner, `dbt run` and `dbt build --full-refresh` race over one warehouse
while a writer inserts into the source. A `dbt build` started before one of the runner's ticks
takes its data timestamp from its own start; its rebuilds are done as of the later one the runner
reached, and its plain refreshes are skipped, so every DT's versions hold data timestamps in order
and each equals its query at its own.

The race's processes run on a warehouse of their own with the embedded engine's profile; the test
process writes the source and checks the result through the session's engine, as the crash tests
do. On both engines, one process plays the runner's part: its batch holds the frontier its
refresh reached, as another process's would, while `dbt run --full-refresh` starts before it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from dbt.tests.util import run_dbt

from dbt.adapters.dyntable.delta_log import DeltaLog
from dbt.adapters.dyntable.dynamic_table.lifecycle import RefreshRequest, Trigger
from dbt.adapters.dyntable.dynamic_table.metadata import HistoryRow, MetadataStore
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.refresh.carried import carried_intent
from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService
from dbt.adapters.dyntable.dynamic_table.verify import check_dvs
from dbt.adapters.dyntable.engines.base import Engine
from dbt.adapters.dyntable.engines.warehouse import PersistedTable
from tests.functional.dynamic_table.dvs import assert_dvs, history, project_engine
from tests.functional.lifecycle.helpers import EventsProject
from tests.functional.profiles import engine_target, write_profiles

DBT = str(Path(sys.executable).with_name("dbt"))
DYNTABLE = str(Path(sys.executable).with_name("dyntable"))
#: How many times `dbt run` and `dbt build --full-refresh` each run while the runner ticks (about
#: once a second at --time-scale 0.02).
INVOCATIONS = 1

MODELS = {
    "by_kind": "{{{{ config(materialized='dynamic_table', target_lag='4 seconds') }}}}\n"
    "select kind, count(*) as n, sum(id) as ids from {raw}.events group by kind",
    "kinds": "{{{{ config(materialized='dynamic_table', target_lag='4 seconds') }}}}\n"
    "select kind from {{{{ ref('by_kind') }}}} where n > 0",
    "events": "{{{{ config(materialized='dynamic_table', target_lag='4 seconds') }}}}\n"
    "select id, kind from {raw}.events",
}


def by_version(rows: List[HistoryRow]) -> Dict[int, List[datetime]]:
    """The data timestamps refreshes recorded each DT version as holding."""
    held: Dict[int, List[datetime]] = {}
    for row in rows:
        if row.state == "SUCCEEDED" and row.dt_version is not None and row.data_timestamp is not None:
            held.setdefault(row.dt_version, []).append(row.data_timestamp)
    return held


def out_of_order(held: Dict[int, List[datetime]]) -> List[Tuple[int, datetime, int, datetime]]:
    """Pairs of versions where the later one holds an earlier data timestamp."""
    found = []
    versions = sorted(held)
    for earlier, later in zip(versions, versions[1:]):
        if min(held[later]) < max(held[earlier]):
            found.append((earlier, max(held[earlier]), later, min(held[later])))
    return found


def carried_timestamps(location: Path) -> Dict[int, datetime]:
    """The data timestamp each DT commit that carries its refresh's intent was made at."""
    log = DeltaLog(location)
    carried = {}
    for version in range(log.latest_version() + 1):
        intent = carried_intent(log.commit_info(version))
        if intent is not None:
            carried[version] = intent.data_timestamp
    return carried


def invoke(
    project: List[str], outcomes: List[Tuple[str, subprocess.CompletedProcess]], command: List[str]
) -> None:
    for _ in range(INVOCATIONS):
        done = subprocess.run([DBT, "--no-use-colors", *command, *project], capture_output=True, text=True)
        outcomes.append((" ".join(command), done))


def write_events(engine: Engine, raw: str, stop: threading.Event) -> None:
    """Insert a row into the source every half second until ``stop``."""
    next_id = 3
    while not stop.wait(0.5):
        engine.execute(f"insert into {raw}.events values ({next_id}, '{'abc'[next_id % 3]}')")
        next_id += 1


@pytest.mark.skip_profile(
    "spark_session",
    reason="three processes cannot share the JVM engine's local metastore (one process at a time)",
)
def test_data_timestamps_never_go_back_under_a_runner_dbt_run_and_full_refresh(
    engine: Engine, tmp_path: Path, dyntable_profile: str
) -> None:
    suffix = uuid.uuid4().hex[:8]
    raw, app = f"raw_{suffix}", f"app_{suffix}"
    warehouse = tmp_path / "warehouse"
    (tmp_path / "models").mkdir()
    (tmp_path / "dbt_project.yml").write_text(
        "name: race\nversion: '1.0'\nconfig-version: 2\nprofile: race\n"
    )
    write_profiles(tmp_path, "race", engine_target(dyntable_profile, warehouse, schema=app, short_lived=True))
    for name, sql in MODELS.items():
        (tmp_path / "models" / f"{name}.sql").write_text(sql.format(raw=raw))
    engine.execute(f"create schema {raw}")
    engine.execute(
        f"create table {raw}.events (id bigint, kind string) using delta location '{warehouse / raw / 'events'}'"
    )
    engine.execute(f"insert into {raw}.events values (1, 'a'), (2, 'b')")
    project = ["--project-dir", str(tmp_path), "--profiles-dir", str(tmp_path)]
    # The schema dbt would create: the runner creates tables, not schemas (the embedded engine
    # attaches a schema from its folder).
    (warehouse / app).mkdir(parents=True)
    try:
        runner_output = tmp_path / "runner.log"
        with runner_output.open("w") as output:
            runner = subprocess.Popen(
                [DYNTABLE, "run", "--time-scale", "0.02", *project],
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        writing = threading.Event()
        writer = threading.Thread(target=write_events, args=(engine, raw, writing))
        writer.start()
        try:
            deadline = time.monotonic() + 120
            while not all((warehouse / app / m / "_delta_log").is_dir() for m in MODELS):
                assert runner.poll() is None and time.monotonic() < deadline, runner_output.read_text()[
                    -3000:
                ]
                time.sleep(0.2)
            outcomes: List[Tuple[str, subprocess.CompletedProcess]] = []
            racers = [
                threading.Thread(target=invoke, args=(project, outcomes, command))
                for command in (["run"], ["build", "--full-refresh"])
            ]
            for racer in racers:
                racer.start()
            for racer in racers:
                racer.join(timeout=600)
        finally:
            writing.set()
            writer.join()
            runner.send_signal(signal.SIGINT)  # it stops after the refreshes in flight
            stopped = runner.wait(timeout=120)
        store = MetadataStore(warehouse / "dyntable_meta", "dyntable_meta")
        failed = [
            (r.name, r.refresh_trigger, r.state_message) for r in store.history() if r.state == "FAILED"
        ]
        assert failed == [] and stopped == 0, (failed, runner_output.read_text()[-2000:])
        for command, done in outcomes:
            assert done.returncode == 0, f"dbt {command}: {done.stdout[-3000:]}"
        assert len(outcomes) == 2 * INVOCATIONS

        engine.execute(f"create schema if not exists {app}")
        raised = 0
        for model in MODELS:
            name = f"{app}.{model}"
            rows = store.history(name)
            assert out_of_order(by_version(rows)) == [], [
                (r.dt_version, r.data_timestamp, r.refresh_action, r.state, r.reason) for r in rows
            ]
            carried = carried_timestamps(warehouse / app / model)
            stamps = [carried[v] for v in sorted(carried)]
            assert stamps == sorted(stamps), json.dumps({v: str(t) for v, t in carried.items()})
            raised += sum("a data timestamp never goes back" in (r.reason or "") for r in rows)
            engine.execute(PersistedTable(app, model, warehouse / app / model).create_statement())
            check = check_dvs(engine, store, name)
            assert check.ok, f"{name}: {check.detail}"
        # The race happened: a rebuild asked for at an older data timestamp was done at the later one.
        assert raised > 0
    finally:
        for schema in (raw, app):
            engine.execute(f"drop schema if exists {schema} cascade")


@pytest.mark.jvm_ci
class TestAFullRefreshStartedBeforeALaterRefresh(EventsProject):
    def test_is_rebuilt_as_of_the_later_data_timestamp_and_a_plain_run_skips(
        self, project, raw, dyntable_warehouse
    ):
        run_dbt(["run"])
        name = f"{project.test_schema}.totals"
        built = assert_dvs(project, dyntable_warehouse, "totals")
        dt = DynamicTable.from_node(
            {
                "schema": project.test_schema,
                "name": "totals",
                "compiled_code": built.definition,
                "config": {"target_lag": "1 minute"},
            }
        )
        project.run_sql(f"insert into {raw}.events values (3, 'c')")
        # The runner's tick: a data timestamp after the dbt invocations below start, and a
        # frontier that its batch writes only at its end (another process's, to dbt).
        runner = DynamicTableService(project_engine(project), dyntable_warehouse, "dyntable_meta")
        later = datetime.now(timezone.utc) + timedelta(minutes=10)
        with runner.batch():
            ticked = runner.refresh(dt, RefreshRequest(later, Trigger.SCHEDULED))
            assert ticked.action in ("INCREMENTAL", "FULL") and ticked.data_timestamp == later
            run_dbt(["run", "--full-refresh", "--select", "totals"])
            run_dbt(["run", "--select", "totals"])
        rows = [r for r in history(dyntable_warehouse, name) if r.refresh_trigger == "DBT_RUN"][-2:]
        rebuilt, skipped = rows
        assert (rebuilt.refresh_action, rebuilt.state) == ("REINITIALIZE", "SUCCEEDED"), rebuilt
        assert rebuilt.data_timestamp == later, rebuilt
        assert "which another refresh reached" in rebuilt.reason
        assert "a data timestamp never goes back" in rebuilt.reason
        assert skipped.state == "SKIPPED" and "already refreshed to a later data timestamp" in skipped.reason
        assert out_of_order(by_version(history(dyntable_warehouse, name))) == []
        assert assert_dvs(project, dyntable_warehouse, "totals").data_timestamp == later
