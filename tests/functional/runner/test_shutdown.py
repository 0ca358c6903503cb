"""`dyntable run` stopped by SIGTERM (a container's or systemd's stop) while a refresh applies its
change, on the engine under test: the runner exits 0 within 10 s, the refresh in flight either
completed or was cancelled (recorded CANCELLED, nothing half-applied, no failure counted), and the
next runner's tick carries on exactly (docs/ARCHITECTURE.md, "Interrupting a run").

The runner runs in a process of its own, on a warehouse of its own, as the SIGKILL tests' dbt
processes do (tests/functional/dynamic_table/test_crash_recovery.py, whose project it reuses). The
DT refreshes incrementally: its delta is a query the engine runs (a job JVM Spark can cancel),
which this process then merges into the DT.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from dbt.adapters.dyntable.dynamic_table.failpoints import ENV
from dbt.adapters.dyntable.engines.base import INTERRUPTED, Engine
from tests.functional.dynamic_table.test_crash_recovery import (
    MODEL,
    CrashProject,
    assert_dt_matches_query,
    crash_project,
    dbt_run,
)

DYNTABLE = str(Path(sys.executable).with_name("dyntable"))
#: What the issue asks of a stop: exit within 10 s of the signal.
STOP_BOUND_SECONDS = 10


def dyntable_run(project: CrashProject, *args: str, failpoint: str | None = None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in (ENV, "DBT_LOG_PATH")}
    if failpoint:
        env[ENV] = failpoint
    return subprocess.Popen(
        [DYNTABLE, "run", *args, "--project-dir", str(project.root), "--profiles-dir", str(project.root)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def events(stdout: str) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


@pytest.fixture
def project(tmp_path: Path, dyntable_profile: str, engine: Engine) -> Iterator[CrashProject]:
    yield from crash_project(tmp_path, dyntable_profile, engine, MODEL, "incremental")


@pytest.mark.jvm_ci
def test_sigterm_during_a_refresh_exits_0_in_bounds_and_the_next_tick_continues(engine, project):
    raw = project.raw
    engine.execute(f"insert into {raw}.customers values (1, 'GB'), (2, 'US'), (3, 'NL')")
    engine.execute(f"insert into {raw}.orders values (1, 1, 10.0), (2, 2, 20.0), (3, 3, 30.0)")
    built = dbt_run(project.root)
    assert built.returncode == 0, built.stdout[-3000:]
    engine.execute(f"insert into {raw}.orders values (4, 1, 5.0), (5, 2, 7.0)")

    # SIGTERM as the refresh's apply starts: it gets half of the default --stop-timeout (8 s) to
    # finish, then it is cancelled
    runner = dyntable_run(
        project, "--time-scale", "0.05", "--log-format", "json", failpoint="during_apply:SIGTERM"
    )
    stdout, stderr = runner.communicate(timeout=600)
    ended = time.time()
    assert runner.returncode == 0, stdout[-3000:] + stderr[-3000:]
    logged = events(stdout)
    (signalled,) = [
        e for e in logged if e["event"] == "message" and e["message"].startswith("SIGTERM: stopping")
    ]
    stopped_at = datetime.fromisoformat(signalled["time"].replace("Z", "+00:00")).timestamp()
    assert ended - stopped_at < STOP_BOUND_SECONDS, (signalled, ended)
    # The runner's data timestamps fall on its tick grid (19.2 s here): the first may precede the
    # insert above, and then that tick is NO_DATA (delayed view semantics) and the next applies.
    # On a loaded machine a tick may come while the one before still refreshes: it is SKIPPED.
    # Either way the earlier ticks apply nothing, and the tick in flight at SIGTERM is the last:
    # no tick starts after it. Its events may come before SIGTERM's message: Python runs the
    # handler on the main thread, which on a busy machine may get the CPU only after the refresh
    # thread logged its tick.
    ticks = [e for e in logged if e["event"] == "tick"]
    *before, refreshed = [e for e in logged if e["event"] == "refresh"]
    assert all(e["action"] == "NO_DATA" or e["state"] == "SKIPPED" for e in before), [
        (e["state"], e["action"], e["reason"]) for e in before
    ]
    assert ticks[-1]["data_timestamp"] == refreshed["data_timestamp"], logged
    assert [e["event"] for e in logged[logged.index(refreshed) :] if e["event"] == "tick"] == ["tick"], logged
    assert [e["ticks"] for e in logged if e["event"] == "stopped"] == [len(ticks)], logged

    history = project.store().history(project.dt)
    in_flight = history[-1]
    assert in_flight.refresh_trigger == "SCHEDULED" and in_flight.state in ("CANCELLED", "SUCCEEDED"), history
    assert in_flight.state == "SUCCEEDED" or in_flight.state_message == INTERRUPTED, in_flight
    assert "FAILED" not in {h.state for h in history}
    assert (project.store().graph()[project.dt].consecutive_failures or 0) == 0
    assert (refreshed["model"], refreshed["state"]) == ("country_dt", str(in_flight.state))

    # the next runner's tick: what the cancelled refresh left is resolved, the DT is its query
    engine.execute(f"insert into {raw}.orders values (6, 3, 1.0)")
    after = dyntable_run(project, "--once", "--time-scale", "0.05", "--log-format", "json")
    stdout, stderr = after.communicate(timeout=600)
    assert after.returncode == 0, stdout[-3000:] + stderr[-3000:]
    assert project.store().history(project.dt)[-1].state == "SUCCEEDED"
    assert_dt_matches_query(engine, project)
