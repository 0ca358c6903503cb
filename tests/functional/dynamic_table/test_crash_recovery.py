"""Exactly-once apply under SIGKILL at every step of a refresh (docs/ARCHITECTURE.md, "Exactly once"),
on the engine under test.

Each case runs `dbt run` in its own process with a failpoint armed, so the process dies at that
step with no cleanup; then a normal `dbt run` must recover by itself: the DT equals its query at
its data timestamp (no duplicated or missing rows) and the history says what happened.

The dbt processes run on a warehouse of their own, with the profile of the engine under test. The
test process writes the raw tables and checks the result through the session's engine, which
reaches that warehouse's tables by their locations: the raw tables are created there, and the
dbt processes find them at ``<warehouse>/<schema>/<table>`` as they would tables written by any
other tool.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from dbt.adapters.dyntable.delta_log import DeltaLog
from dbt.adapters.dyntable.dynamic_table.failpoints import ENV
from dbt.adapters.dyntable.dynamic_table.metadata import MetadataStore
from dbt.adapters.dyntable.dynamic_table.verify import check_dvs
from dbt.adapters.dyntable.engines.base import INTERRUPTED, Engine
from dbt.adapters.dyntable.engines.warehouse import PersistedTable
from tests.functional.profiles import engine_target, write_profiles

DBT = str(Path(sys.executable).with_name("dbt"))
#: Runs a command with SIGINT as a terminal's foreground job has it: a test run started in the
#: background ignores SIGINT, and so would its dbt processes.
FOREGROUND = [
    sys.executable,
    "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])",
]

MODEL = """
{{{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='{mode}') }}}}
select c.country, count(*) as orders, sum(o.amount) as revenue
from {raw}.orders as o join {raw}.customers as c on o.customer_id = c.customer_id
group by c.country
"""

#: Append-only, compacted at 2 small files: the second refresh compacts it. Its inserts are
#: appended by the engine (the ``appended`` shape).
APPENDED = """
{{{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='{mode}', auto_compact=2) }}}}
select o.order_id, c.country, o.amount
from {raw}.orders as o join {raw}.customers as c on o.customer_id = c.customer_id
"""


#: Refreshed before country_dt: dbt runs the models of one level in the order of their names.
BY_CUSTOMER = """
{{{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='full') }}}}
select customer_id, count(*) as orders, sum(amount) as amount from {raw}.orders group by customer_id
"""


@dataclass
class CrashProject:
    root: Path
    raw: str
    app: str

    @property
    def warehouse(self) -> Path:
        return self.root / "warehouse"

    @property
    def dt(self) -> str:
        return f"{self.app}.country_dt"

    def store(self) -> MetadataStore:
        return MetadataStore(self.warehouse / "dyntable_meta", "dyntable_meta")


def crash_project(
    root: Path, dyntable_profile: str, engine: Engine, model: str, mode: str
) -> Iterator[CrashProject]:
    """For a fixture: a dbt project in ``root`` with one DT (``model``, formatted with ``mode``
    and the raw schema) over two empty raw tables, whose profile is the engine under test."""
    suffix = uuid.uuid4().hex[:8]
    project = CrashProject(root, f"raw_{suffix}", f"app_{suffix}")
    (root / "models").mkdir()
    (root / "dbt_project.yml").write_text("name: crash\nversion: '1.0'\nconfig-version: 2\nprofile: crash\n")
    write_profiles(
        root,
        "crash",
        engine_target(dyntable_profile, project.warehouse, schema=project.app, short_lived=True),
    )
    (root / "models" / "country_dt.sql").write_text(model.format(mode=mode, raw=project.raw))
    engine.execute(f"create schema {project.raw}")
    for table, columns in (
        ("customers", "customer_id bigint, country string"),
        ("orders", "order_id bigint, customer_id bigint, amount double"),
    ):
        location = project.warehouse / project.raw / table
        engine.execute(f"create table {project.raw}.{table} ({columns}) using delta location '{location}'")
    yield project
    # Only the session engine's catalog entries go: the files stay in the test's own warehouse.
    for schema in (project.raw, project.app):
        engine.execute(f"drop schema if exists {schema} cascade")


@pytest.fixture
def project(tmp_path: Path, dyntable_profile: str, engine: Engine, request) -> Iterator[CrashProject]:
    appended = "compaction" in request.node.name or request.node.callspec.params.get("shape") == "appended"
    model = APPENDED if appended else MODEL
    yield from crash_project(tmp_path, dyntable_profile, engine, model, request.node.callspec.params["mode"])


def dbt_run(root: Path, failpoint: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if failpoint:
        env[ENV] = failpoint
    return subprocess.run(
        [*FOREGROUND, DBT, "--no-use-colors", "run", "--project-dir", str(root), "--profiles-dir", str(root)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        start_new_session=True,  # a failpoint's SIGINT to its process group reaches dbt alone
    )


def assert_dt_matches_query(engine: Engine, project: CrashProject, model: str = "country_dt") -> None:
    engine.execute(f"create schema if not exists {project.app}")
    location = project.warehouse / project.app / model
    engine.execute(PersistedTable(project.app, model, location).create_statement())
    check = check_dvs(engine, project.store(), f"{project.app}.{model}")
    assert check.ok, check.detail


STEPS = [
    ("after_intent", "CANCELLED"),  # the DT never committed: discard and redo
    ("after_apply", "SUCCEEDED"),  # the DT committed, the frontier did not: adopt it
    ("during_apply:0.02", None),  # either, depending on when the kill lands
    # The refresh ended; its frontier waited for the end of dbt's invocation: adopt it.
    ("after_refresh", "SUCCEEDED"),
]
#: The JVM suite's CI subset kills where Spark writes the DT: after its MERGE committed, while
#: a rebuild's commit may land, and after the refresh ended (each case is three dbt processes,
#: each starting a JVM). A kill after the intent leaves no DT commit, the same on both engines;
#: the full set runs all eight.
IN_JVM_CI = {("incremental", "after_apply"), ("full", "during_apply:0.02"), ("incremental", "after_refresh")}


@pytest.mark.parametrize(
    "mode, failpoint, recovered_state",
    [
        pytest.param(
            mode, failpoint, state, marks=[pytest.mark.jvm_ci] if (mode, failpoint) in IN_JVM_CI else []
        )
        for failpoint, state in STEPS
        for mode in ("incremental", "full")
    ],
)
def test_sigkill_at_each_step_recovers(engine, project, mode, failpoint, recovered_state):
    raw = project.raw
    for statement in (
        f"insert into {raw}.customers values (1, 'GB'), (2, 'US'), (3, 'NL')",
        f"insert into {raw}.orders values (1, 1, 10.0), (2, 2, 20.0), (3, 3, 30.0), (4, 1, 5.0)",
    ):
        engine.execute(statement)
    first = dbt_run(project.root)
    assert first.returncode == 0, first.stdout[-3000:]
    for statement in (
        f"insert into {raw}.orders values (5, 2, 7.0), (6, 3, 1.0)",
        f"delete from {raw}.orders where order_id = 1",
        f"update {raw}.customers set country = 'US' where customer_id = 3",
    ):
        engine.execute(statement)

    killed = dbt_run(project.root, failpoint)
    assert killed.returncode == -signal.SIGKILL, killed.stdout[-3000:]
    left = project.store().frontier(project.dt)
    # Whether the refresh's DT commit carries its intent (docs/ARCHITECTURE.md, "Exactly once"):
    # a rebuild's does (this process writes the rows that differ), and on Sail every write's does
    # (an engine MERGE in a conjunct of its condition); else the intent was recorded first.
    carried = left is not None and left.pending is None
    if mode == "full" or engine.capabilities.merge_condition_recorded:
        assert carried, left

    recovered = dbt_run(project.root)
    assert recovered.returncode == 0, recovered.stdout[-3000:]
    assert_dt_matches_query(engine, project)

    store = project.store()
    recovery = [h for h in store.history(project.dt) if h.refresh_trigger == "RECOVERY"]
    if carried and recovered_state != "SUCCEEDED":
        # Killed before the commit carrying its intent landed, it left nothing to resolve.
        assert len(recovery) <= (1 if recovered_state is None else 0), store.history(project.dt)
        assert all(h.state == "SUCCEEDED" for h in recovery), recovery
        return
    assert len(recovery) == 1, store.history(project.dt)
    if recovered_state:
        assert recovery[0].state == recovered_state
    assert recovery[0].state_message.startswith("recovered:")


@pytest.mark.jvm_ci
@pytest.mark.parametrize("mode", ["incremental"])
def test_sigkill_right_after_a_dt_is_created_leaves_it_to_be_rebuilt(engine, project, mode):
    """The refresh creating a DT records no intent (docs/ARCHITECTURE.md, "Exactly once"):
    killed after its CREATE TABLE ... AS SELECT, it left the DT without a frontier, which the
    next run rebuilds, writing nothing since the DT holds the query's rows already."""
    raw = project.raw
    engine.execute(f"insert into {raw}.customers values (1, 'GB'), (2, 'US')")
    engine.execute(f"insert into {raw}.orders values (1, 1, 10.0), (2, 2, 20.0), (3, 1, 5.0)")
    killed = dbt_run(project.root, "after_apply")
    assert killed.returncode == -signal.SIGKILL, killed.stdout[-3000:]
    store = project.store()
    assert store.frontier(project.dt) is None
    commits = sorted((project.warehouse / project.app / "country_dt" / "_delta_log").glob("*.json"))
    assert commits  # the DT was created

    recovered = dbt_run(project.root)
    assert recovered.returncode == 0, recovered.stdout[-3000:]
    assert_dt_matches_query(engine, project)
    assert sorted((project.warehouse / project.app / "country_dt" / "_delta_log").glob("*.json")) == commits
    (rebuilt,) = store.history(project.dt)
    assert (rebuilt.state, rebuilt.refresh_action) == ("SUCCEEDED", "REINITIALIZE"), rebuilt
    assert "no frontier recorded" in rebuilt.reason, rebuilt


@pytest.mark.parametrize("mode, delay", [("incremental", ""), ("incremental", ":0.02")])
def test_sigkill_during_compaction_loses_nothing(engine, project, mode, delay):
    """Killed before or while compacting, after the refresh committed the DT (its frontier waits
    for the end of dbt's invocation): the next run adopts that commit and refreshes incrementally,
    whether the compaction's commit landed or not."""
    raw = project.raw
    engine.execute(f"insert into {raw}.customers values (1, 'GB'), (2, 'US')")
    engine.execute(f"insert into {raw}.orders values (1, 1, 10.0), (2, 2, 20.0)")
    first = dbt_run(project.root)
    assert first.returncode == 0, first.stdout[-3000:]
    engine.execute(f"insert into {raw}.orders values (3, 1, 5.0)")
    killed = dbt_run(project.root, f"during_compaction{delay}")
    assert killed.returncode == -signal.SIGKILL, killed.stdout[-3000:]
    engine.execute(f"insert into {raw}.orders values (4, 2, 7.0)")
    engine.execute(f"delete from {raw}.orders where order_id = 1")
    recovered = dbt_run(project.root)
    assert recovered.returncode == 0, recovered.stdout[-3000:]
    assert_dt_matches_query(engine, project)
    latest = project.store().history(project.dt)[-1]
    assert (latest.state, latest.refresh_action) == ("SUCCEEDED", "INCREMENTAL"), latest


@pytest.mark.parametrize(
    "mode, shape",
    [
        # The JVM suite's CI subset leaves the grouped DT to the embedded suite: this process writes
        # its commit on either engine. The engine writes the appended DT's.
        ("incremental", "grouped"),
        ("incremental", "merged"),
        pytest.param("incremental", "appended", marks=pytest.mark.jvm_ci),
    ],
)
def test_sigkill_after_a_commit_carrying_its_intent_recovers(engine, project, mode, shape):
    """Inserts folded into the stored groups are merged by this process, inserts into an
    append-only DT appended by the engine (a writer option records the intent), a delete among
    them MERGEd on the groups' key (by Sail, in a conjunct of its condition; by this process on
    JVM Spark): each DT commit carries the refresh's intent instead of a metadata commit before
    it. Killed after that commit, the next run adopts it; the DT holds each row once."""
    raw = project.raw
    engine.execute(f"insert into {raw}.customers values (1, 'GB'), (2, 'US')")
    engine.execute(f"insert into {raw}.orders values (1, 1, 10.0), (2, 2, 20.0)")
    first = dbt_run(project.root)
    assert first.returncode == 0, first.stdout[-3000:]
    engine.execute(f"insert into {raw}.orders values (3, 1, 5.0), (4, 2, 7.0), (5, 2, 1.0)")
    if shape == "merged":
        engine.execute(f"delete from {raw}.orders where order_id = 2")
    killed = dbt_run(project.root, "after_apply")
    assert killed.returncode == -signal.SIGKILL, killed.stdout[-3000:]
    left = project.store().frontier(project.dt)
    assert left is not None and left.pending is None  # the intent went in the DT's commit alone
    if shape == "merged":
        dt_log = DeltaLog(project.warehouse / project.app / "country_dt")
        assert dt_log.commit_info(dt_log.latest_version())["operation"] == "MERGE"
    recovered = dbt_run(project.root)
    assert recovered.returncode == 0, recovered.stdout[-3000:]
    assert_dt_matches_query(engine, project)
    history = project.store().history(project.dt)
    recovery = [h for h in history if h.refresh_trigger == "RECOVERY"]
    assert [(h.state, h.refresh_action, h.reason) for h in recovery] == [
        ("SUCCEEDED", "INCREMENTAL", "a commit carrying the intent of an unrecorded refresh found at start")
    ]
    assert history[-1].refresh_action == "NO_DATA", history[-1]  # adopted, not rebuilt


# In the full JVM set, not its CI subset (three and a half minutes there): the JVM engine's
# interrupt is tested on its own in test_engines.py and test_engine_conformance.py.
@pytest.mark.parametrize("mode", ["full"])
def test_ctrl_c_stops_dbt_run_and_the_next_run_catches_up(engine, project, mode):
    """Ctrl-C (SIGINT to dbt's process group, as a terminal sends it) as a refresh applies its
    change: dbt stops at once, no other model starts, the refresh is cancelled or completes (its
    statement was cancelled, refused, or had ended), never FAILED; the next run brings every DT
    to its query (docs/ARCHITECTURE.md, "Interrupting a run")."""
    raw = project.raw
    engine.execute(f"insert into {raw}.customers values (1, 'GB'), (2, 'US'), (3, 'NL')")
    engine.execute(f"insert into {raw}.orders values (1, 1, 10.0), (2, 2, 20.0), (3, 3, 30.0)")
    (project.root / "models" / "by_customer_dt.sql").write_text(BY_CUSTOMER.format(raw=raw))

    interrupted = dbt_run(project.root, "during_apply:SIGINT")
    output = interrupted.stdout
    assert interrupted.returncode != 0 and "Exited because of keyboard interrupt" in output, output[-3000:]
    started = [line for line in output.splitlines() if " START " in line]
    assert len(started) == 1 and "by_customer_dt" in started[0], output[-3000:]  # not country_dt
    (attempt,) = project.store().history(f"{project.app}.by_customer_dt")
    assert attempt.state in ("CANCELLED", "SUCCEEDED"), attempt
    assert attempt.state == "SUCCEEDED" or attempt.state_message == INTERRUPTED, attempt

    engine.execute(f"insert into {raw}.orders values (4, 1, 5.0)")
    caught_up = dbt_run(project.root)
    assert caught_up.returncode == 0, caught_up.stdout[-3000:]
    for model in ("by_customer_dt", "country_dt"):
        assert_dt_matches_query(engine, project, model)
