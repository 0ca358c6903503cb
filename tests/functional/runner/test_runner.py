"""The `dyntable` runner on the engine under test, driven in-process through its CLI.

A pipeline over two raw Delta tables:

    raw.orders → orders_dt (8 s) → revenue_dt (downstream) → big_dt (16 s)
    raw.customers → lookup_dt (1 h) ⇢ enriched_dt (8 s), which also reads orders_dt
                                   (⇢: through refresh_boundary)

With --time-scale 0.05 the canonical unit is 2.4 s, so a short `dyntable run --for` makes several
ticks while rows keep arriving; afterwards every DT must equal its query at its data timestamp and
have stayed within its target lag.

The scenario runs on a clock of its engine (:data:`CLOCK`): on the JVM engine every lag, period,
the run's length and the writer's pace are eight times the embedded engine's. The test is about
the runner keeping lags whose period leaves room for a tick's refreshes. An 8 s lag gets a 2.4 s
period. A tick of this pipeline (four FULL refreshes one after the other: the profile has one
thread) takes well under a second on the embedded engine; on JVM Spark with Delta on two cores it
takes 12-17 s: each FULL refresh, even of a few rows, is about 13 Spark jobs and the Delta
commits around them, 2-5 s in all. A DT whose previous refresh still runs at a tick is skipped
(by design, as Snowflake does), so its lag peaks at two periods plus its wait and refresh, past
its target: a lag the engine cannot keep, not a runner fault. On the slower clock the JVM engine's
tick fits in the period as the embedded engine's does.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List

import pytest
import yaml
from dbt.tests.util import run_dbt, write_file
from typer.testing import CliRunner

from dbt.adapters.dyntable.cli import app
from dbt.adapters.dyntable.cli import output as cli
from dbt.adapters.dyntable.cli.status import HISTORY_ROWS
from dbt.adapters.dyntable.dynamic_table.config import TargetLag
from dbt.adapters.dyntable.dynamic_table.lifecycle import SchedulingState, Trigger, to_ms
from dbt.adapters.dyntable.runner.graph import CANONICAL_UNIT_MS, canonical_period_ms
from tests.functional.dynamic_table.dvs import assert_dvs, history, metadata, project_engine
from tests.functional.sources import raw_sources

ORDERS_DT = """
{{ config(materialized='dynamic_table', target_lag='8 seconds', refresh_mode='full') }}
select order_id, customer_id, amount from {{ source('raw', 'orders') }}
"""

REVENUE_DT = """
{{ config(materialized='dynamic_table', target_lag='downstream', refresh_mode='full') }}
select customer_id, count(*) as orders, sum(amount) as revenue
from {{ ref('orders_dt') }}
group by customer_id
"""

BIG_DT = """
{{ config(materialized='dynamic_table', target_lag='16 seconds', refresh_mode='full') }}
select customer_id, revenue from {{ ref('revenue_dt') }} where revenue > 10
"""

LOOKUP_DT = """
{{ config(materialized='dynamic_table', target_lag='1 hour', refresh_mode='full') }}
select customer_id, upper(name) as name from {{ source('raw', 'customers') }}
"""

ENRICHED_DT = """
{{ config(materialized='dynamic_table', target_lag='8 seconds', refresh_mode='full') }}
select o.order_id, o.amount, l.name
from {{ ref('orders_dt') }} as o
join {{ refresh_boundary(ref('lookup_dt')) }} as l on o.customer_id = l.customer_id
"""

SOURCES = raw_sources("orders", "customers")

MODELS = ["orders_dt", "revenue_dt", "big_dt", "lookup_dt", "enriched_dt"]
PIPELINE = ["orders_dt", "revenue_dt", "big_dt", "enriched_dt"]

#: How many times slower the scenario's clock runs on each engine (see the module's docstring).
CLOCK = {"embedded": 1, "spark_session": 8}


@dataclass(frozen=True)
class Clock:
    factor: int

    def seconds(self, seconds: float) -> float:
        return seconds * self.factor

    def lag(self, sql: str) -> str:
        """A model with its target lag on this clock."""
        return re.sub(
            r"target_lag='(\d+) seconds'",
            lambda m: f"target_lag='{int(m.group(1)) * self.factor} seconds'",
            sql,
        )

    @property
    def time_scale(self) -> str:
        return f"{0.05 * self.factor:g}"

    @property
    def unit(self) -> str:
        """The canonical unit (48 s at --time-scale 1), as `dyntable status` shows a period."""
        return f"{2.4 * self.factor:g} s"


@pytest.fixture(scope="module")
def clock(dyntable_profile: str) -> Clock:
    return Clock(CLOCK[dyntable_profile])


def dyntable(project: Any, *args: str, profiles_dir: Any = None) -> Any:
    """Run the `dyntable` CLI in this process (its engine is the one dbt already started)."""
    # CliRunner is no terminal: rich would wrap tables at 80 columns.
    cli.console.width = cli.errors.width = 240
    result = CliRunner().invoke(
        app,
        [
            *args,
            "--project-dir",
            str(project.project_root),
            "--profiles-dir",
            str(profiles_dir or project.profiles_dir),
        ],
    )
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def rows_by_name(warehouse: Path, project: Any, model: str) -> List[Dict[str, Any]]:
    return history(warehouse, f"{project.test_schema}.{model}")


@pytest.fixture(scope="class")
def models(clock: Clock):
    return {
        "orders_dt.sql": clock.lag(ORDERS_DT),
        "revenue_dt.sql": REVENUE_DT,
        "big_dt.sql": clock.lag(BIG_DT),
        "lookup_dt.sql": LOOKUP_DT,
        "enriched_dt.sql": clock.lag(ENRICHED_DT),
        "sources.yml": SOURCES,
    }


@pytest.fixture(scope="class")
def raw(project):
    schema = f"{project.test_schema}_raw"
    project.run_sql(f"create schema if not exists {schema}")
    project.run_sql(f"create table {schema}.customers (customer_id bigint, name string) using delta")
    project.run_sql(
        f"create table {schema}.orders (order_id bigint, customer_id bigint, amount double) using delta"
    )
    project.run_sql(f"insert into {schema}.customers values (1, 'ada'), (2, 'grace'), (3, 'edsger')")
    project.run_sql(f"insert into {schema}.orders values (10, 1, 50.0), (11, 2, 7.0), (12, 3, 20.0)")
    run_dbt(["run", "--write-json"])  # its artifacts are the user's, which dyntable must leave alone
    yield schema
    project.run_sql(f"drop schema if exists {schema} cascade")


@pytest.mark.jvm_ci
class TestRunner:
    def test_run_for_keeps_every_dt_fresh_and_equal_to_its_query(
        self, project, raw, dyntable_warehouse, clock
    ):
        engine = project_engine(project)
        stop = threading.Event()

        def keep_writing() -> None:
            # Fewer than ten commits in all: Sail 0.7.2 cannot read VERSION AS OF a version
            # older than the table's latest checkpoint (written every ten commits), which the
            # refresh and the DVS oracle both do.
            order_id = 100
            while not stop.wait(clock.seconds(1.6)):
                engine.execute(f"insert into {raw}.orders values ({order_id}, {order_id % 3 + 1}, 3.0)")
                order_id += 1

        writer = threading.Thread(target=keep_writing)
        writer.start()
        try:
            result = dyntable(
                project, "run", "--for", f"{clock.seconds(12):g}s", "--time-scale", clock.time_scale
            )
        finally:
            stop.set()
            writer.join()
        assert result.exit_code == 0, result.output
        assert "Schedule" in result.output and "tick" in result.output

        scheduled = {
            m: [r for r in rows_by_name(dyntable_warehouse, project, m) if r.refresh_trigger == "SCHEDULED"]
            for m in MODELS
        }
        # a tick that overlaps a slow one skips DTs still busy; nothing fails
        states = {r.state for rows in scheduled.values() for r in rows}
        assert states <= {"SUCCEEDED", "SKIPPED"}, scheduled
        scheduled = {m: [r for r in rows if r.state == "SUCCEEDED"] for m, rows in scheduled.items()}
        assert len(scheduled["orders_dt"]) >= 3
        # lookup_dt (1 hour) is not dragged along by enriched_dt, which reads it through a
        # boundary: it refreshes only when a boundary of its own period has passed since its
        # data timestamp, which the run (far shorter than that period) can cross at most once.
        assert len(scheduled["enriched_dt"]) >= 2
        assert len(scheduled["lookup_dt"]) <= 1
        lookup_lag = (
            metadata(dyntable_warehouse)
            .graph(f"{project.test_schema}.lookup_dt")[f"{project.test_schema}.lookup_dt"]
            .target_lag
        )
        lookup_period_ms = canonical_period_ms(
            TargetLag.parse(lookup_lag).seconds, round(CANONICAL_UNIT_MS * float(clock.time_scale))
        )
        lookup = [r for r in rows_by_name(dyntable_warehouse, project, "lookup_dt") if r.state == "SUCCEEDED"]
        for before, after in zip(lookup, lookup[1:]):
            if after.refresh_trigger == "SCHEDULED":
                boundary_ms = to_ms(after.data_timestamp) // lookup_period_ms * lookup_period_ms
                assert to_ms(before.data_timestamp) < boundary_ms, (before, after)
        # one tick, one data timestamp: whenever a DT refreshed at T, what it reads did too
        stamps = {m: {r.data_timestamp for r in rows} for m, rows in scheduled.items()}
        assert stamps["revenue_dt"] <= stamps["orders_dt"]
        assert stamps["big_dt"] <= stamps["revenue_dt"]
        assert stamps["enriched_dt"] <= stamps["orders_dt"]
        assert any(r.refresh_action == "FULL" for r in scheduled["orders_dt"])
        # within target lag: from the first scheduled commit on, no peak exceeded it
        for model in ("orders_dt", "big_dt", "enriched_dt"):
            target = TargetLag.parse(
                metadata(dyntable_warehouse)
                .graph(f"{project.test_schema}.{model}")[f"{project.test_schema}.{model}"]
                .target_lag
            ).seconds
            rows = scheduled[model]
            for before, after in zip(rows, rows[1:]):
                peak = (after.refresh_end_time - before.data_timestamp).total_seconds()
                assert peak <= target, (model, peak, target)
        for model in MODELS:
            assert_dvs(project, dyntable_warehouse, model)

    def test_manual_refresh_brings_upstreams_to_one_new_timestamp(self, project, raw, dyntable_warehouse):
        project.run_sql(f"insert into {raw}.orders values (500, 1, 1000.0)")
        result = dyntable(project, "refresh", "big_dt")
        assert result.exit_code == 0, result.output
        latest = {
            m: rows_by_name(dyntable_warehouse, project, m)[-1] for m in ("orders_dt", "revenue_dt", "big_dt")
        }
        assert {r.refresh_trigger for r in latest.values()} == {"MANUAL"}
        assert {r.state for r in latest.values()} == {"SUCCEEDED"}
        assert len({r.data_timestamp for r in latest.values()}) == 1
        for model in ("orders_dt", "revenue_dt", "big_dt"):
            assert_dvs(project, dyntable_warehouse, model)
        big = project.run_sql(
            f"select revenue from {project.test_schema}.big_dt where customer_id = 1", fetch="one"
        )
        assert big[0] > 1000

    def test_suspend_resume_and_the_read_only_commands(
        self, project, raw, dyntable_warehouse, tmp_path, clock
    ):
        # dbt's artifacts (here the `raw` fixture's `dbt run`'s) are the user's: `dbt retry` and
        # `--state` read them after any dyntable command, which writes its own under .dyntable/
        artifacts = Path(project.project_root, "target")
        dbt_artifacts = {
            name: (artifacts / name).read_bytes() for name in ("run_results.json", "manifest.json")
        }

        assert dyntable(project, "suspend", "orders_dt").exit_code == 0
        status = dyntable(project, "status", "--time-scale", clock.time_scale)
        assert status.exit_code == 0, status.output
        line = next(row for row in status.output.splitlines() if row.lstrip().startswith("orders_dt"))
        assert "SUSPENDED" in line and f"{clock.seconds(8):g} seconds" in line and clock.unit in line
        assert f"downstream → {clock.seconds(16):g} seconds" in status.output  # revenue_dt takes big_dt's lag

        before = len(rows_by_name(dyntable_warehouse, project, "orders_dt"))
        once = dyntable(project, "run", "--once", "--time-scale", clock.time_scale)
        assert once.exit_code == 0, once.output
        assert len(rows_by_name(dyntable_warehouse, project, "orders_dt")) == before  # not refreshed
        assert dyntable(project, "resume", "orders_dt").exit_code == 0
        graph = metadata(dyntable_warehouse).graph(f"{project.test_schema}.orders_dt")
        assert graph[f"{project.test_schema}.orders_dt"].scheduling_state == "ACTIVE"
        once = dyntable(project, "run", "--once", "--time-scale", clock.time_scale)
        assert once.exit_code == 0, once.output
        assert rows_by_name(dyntable_warehouse, project, "orders_dt")[-1].refresh_trigger == "SCHEDULED"

        shown = dyntable(project, "history", "orders_dt")
        # the refreshes the command shows, whichever tests of this class ran before
        shown_rows = rows_by_name(dyntable_warehouse, project, "orders_dt")[-HISTORY_ROWS:]
        triggers = {r.refresh_trigger for r in shown_rows}
        assert "SCHEDULED" in triggers and len(triggers) >= 2, triggers
        assert shown.exit_code == 0 and all(trigger in shown.output for trigger in triggers), shown.output
        graph_out = dyntable(project, "graph")
        assert graph_out.exit_code == 0 and f"{project.test_schema}.lookup_dt" in graph_out.output
        explained = dyntable(project, "explain", "orders_dt")
        assert explained.exit_code == 0 and "refresh_mode is 'full'" in explained.output
        page = tmp_path / "report.html"
        assert dyntable(project, "report", "--output", str(page)).exit_code == 0
        html = page.read_text()
        # the graph, then each DT's lag and durations (lookup_dt's lag may have one refresh only)
        assert (
            html.count("Plotly.newPlot(") >= 1 + 2 * len(MODELS) - 1
            and f"{project.test_schema}.big_dt" in html
        )
        assert {name: (artifacts / name).read_bytes() for name in dbt_artifacts} == dbt_artifacts
        runner_target = Path(project.project_root, ".dyntable", "target")
        assert (runner_target / "partial_parse.msgpack").is_file()
        # the runner keeps its manifest in memory: dbt's large artifacts are not written
        assert not [name for name in ("manifest.json", "run_results.json") if (runner_target / name).exists()]

    def test_explain_shows_the_differentiation_plan(self, project, raw, dyntable_warehouse):
        models = Path(project.project_root, "models")
        write_file(
            REVENUE_DT.replace("refresh_mode='full'", "refresh_mode='incremental'"),
            models,
            "revenue_by_customer_dt.sql",
        )
        try:
            explained = dyntable(project, "explain", "revenue_by_customer_dt")
        finally:
            os.remove(models / "revenue_by_customer_dt.sql")
        assert explained.exit_code == 0, explained.output
        assert "Aggregate" in explained.output and f"{project.test_schema}.orders_dt" in explained.output

    def test_a_second_runner_says_what_holds_the_lock(self, project, raw, dyntable_warehouse):
        locks = dyntable_warehouse / "dyntable_meta" / ".locks"
        holder = subprocess.Popen(
            [
                sys.executable,
                "-c",
                textwrap.dedent(f"""
                import sys, time
                from pathlib import Path
                from dbt.adapters.dyntable.dynamic_table.locking import RefreshLock
                with RefreshLock(Path({str(locks)!r}), {project.test_schema + ".orders_dt"!r}):
                    print("locked", flush=True)
                    sys.stdin.read()
            """),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout.readline().strip() == "locked"
            name = f"{project.test_schema}.orders_dt"
            before = metadata(dyntable_warehouse).frontier(name)
            result = dyntable(project, "refresh", "orders_dt")
            assert result.exit_code == 1
            assert f"being refreshed by process {holder.pid}" in " ".join(result.output.split())
            last = rows_by_name(dyntable_warehouse, project, "orders_dt")[-1]
            assert last.state == "SKIPPED" and str(holder.pid) in last.state_message
            assert metadata(dyntable_warehouse).frontier(name) == before  # nothing refreshed
        finally:
            holder.communicate("")
        assert dyntable(project, "refresh", "orders_dt").exit_code == 0

    def test_bad_input_exits_non_zero_with_one_message_and_refreshes_nothing(
        self, project, raw, dyntable_warehouse, tmp_path, clock
    ):
        count = lambda: sum(len(rows_by_name(dyntable_warehouse, project, m)) for m in MODELS)  # noqa: E731
        before = count()

        unknown = dyntable(project, "refresh", "nope_dt")
        assert unknown.exit_code == 2
        assert "Unknown dynamic table 'nope_dt'" in unknown.output and "orders_dt" in unknown.output

        models = Path(project.project_root, "models")
        write_file(BIG_DT.replace("16 seconds", "2 seconds"), models, "big_dt.sql")
        try:
            too_fast = dyntable(project, "run", "--once")
            assert too_fast.exit_code == 2
            message = " ".join(too_fast.output.split())
            assert "'big_dt'" in message and f"below the {clock.seconds(8):g} seconds" in message
        finally:
            write_file(clock.lag(BIG_DT), models, "big_dt.sql")

        write_file(
            "{{ config(materialized='dynamic_table', target_lag='1 minute' }}\nselect 1",
            models,
            "broken_dt.sql",
        )
        try:
            broken = dyntable(project, "run", "--once")
            assert broken.exit_code == 2 and "does not parse" in broken.output
        finally:
            os.remove(models / "broken_dt.sql")

        write_file(
            clock.lag(ORDERS_DT).replace("{{ source('raw', 'orders') }}", "{{ ref('big_dt') }}"),
            models,
            "orders_dt.sql",
        )
        try:
            cycle = dyntable(project, "run", "--once")
            assert cycle.exit_code == 2 and "cycle" in cycle.output.lower()
        finally:
            write_file(clock.lag(ORDERS_DT), models, "orders_dt.sql")

        profiles = yaml.safe_load(Path(project.profiles_dir, "profiles.yml").read_text())
        outputs = profiles["test"]["outputs"]
        outputs["unreachable"] = dict(outputs["default"], warehouse="/proc/dyntable-cannot-write-here")
        (tmp_path / "profiles.yml").write_text(yaml.safe_dump(profiles))
        try:
            no_engine = dyntable(
                project, "refresh", "orders_dt", "--target", "unreachable", profiles_dir=tmp_path
            )
        finally:
            run_dbt(["parse"])  # dbt's test fixtures use the adapter registered last: the default
        assert no_engine.exit_code == 2 and "Cannot connect" in no_engine.output

        assert count() == before


def now_ms() -> int:
    return int(time.time() * 1000)


#: The same pipeline, with DTs that fail on bad rows (a user error in the data).
STRICT_ORDERS_DT = ORDERS_DT.replace(
    "select order_id, customer_id, amount",
    "select order_id, customer_id,\n"
    "  case when amount < 0 then raise_error('negative amount') else amount end as amount",
)
STRICT_LOOKUP_DT = LOOKUP_DT.replace(
    "upper(name) as name",
    "case when name = '' then raise_error('empty customer name') else upper(name) end as name",
)


@pytest.mark.jvm_ci
class TestFailuresAndBoundaries:
    """The scheduler on the real service: failures, UPSTREAM_FAILED, auto-suspend, boundaries."""

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "orders_dt.sql": STRICT_ORDERS_DT,
            "revenue_dt.sql": REVENUE_DT,
            "big_dt.sql": BIG_DT,
            "lookup_dt.sql": STRICT_LOOKUP_DT,
            "enriched_dt.sql": ENRICHED_DT,
            "sources.yml": SOURCES,
        }

    @pytest.fixture(scope="class")
    def runner(self, project, raw):
        from dbt.adapters.dyntable.runner.graph import build_graph
        from dbt.adapters.dyntable.runner.project import ProjectOptions, load_project
        from dbt.adapters.dyntable.runner.scheduler import Scheduler

        loaded = load_project(ProjectOptions(Path(project.project_root), Path(project.profiles_dir)))
        graph = build_graph(loaded.nodes, unit_ms=2400)
        return Scheduler(graph, loaded.service()), loaded.service()

    def test_failures_upstream_failed_auto_suspend_and_resume(self, project, raw, runner, dyntable_warehouse):
        scheduler, service = runner
        schema = project.test_schema
        roots = [scheduler.graph.by_model(m).name for m in ("big_dt", "enriched_dt")]
        orders_before = sorted(project.run_sql(f"select * from {schema}.orders_dt", fetch="all"))
        project.run_sql(f"insert into {raw}.orders values (13, 1, -5.0)")
        orders = scheduler.graph.by_model("orders_dt").name
        for failures in range(5):
            # a failing DT backs off: a tick before the boundary the runner retries at is held back,
            # the attempt runs at it (or now, when a slow engine already took longer than the wait)
            state = scheduler.backend.states().get(orders)
            retry = state.retry_at_ms(scheduler.graph.period_ms[orders]) if state is not None else None
            assert (retry is None) == (failures == 0)
            tick = now_ms()
            if retry is not None:
                early = scheduler.dispatch(retry - 1, roots=roots)
                held = {o.model: o.state for o in scheduler.execute(early)}
                assert held["orders_dt"] == "SKIPPED"
                tick = max(tick, retry)
            outcomes = {o.model: o.state for o in scheduler.execute(scheduler.dispatch(tick, roots=roots))}
            assert outcomes["orders_dt"] == "FAILED"
            assert (
                outcomes["revenue_dt"] == outcomes["big_dt"] == outcomes["enriched_dt"] == "UPSTREAM_FAILED"
            )
        graph = metadata(dyntable_warehouse).graph()
        assert graph[f"{schema}.orders_dt"].scheduling_state == "SUSPENDED"
        assert graph[f"{schema}.orders_dt"].consecutive_failures == 5
        assert (graph[f"{schema}.big_dt"].consecutive_failures or 0) == 0
        failed = [r for r in rows_by_name(dyntable_warehouse, project, "orders_dt") if r.state == "FAILED"]
        assert len(failed) == 5 and "negative amount" in failed[-1].state_message
        upstream_failed = [
            r for r in rows_by_name(dyntable_warehouse, project, "big_dt") if r.state == "UPSTREAM_FAILED"
        ]
        assert len(upstream_failed) == 5
        # staleness, never inconsistency: orders_dt kept its last good version, and what reads
        # it still equals its query at its own data timestamp
        assert sorted(project.run_sql(f"select * from {schema}.orders_dt", fetch="all")) == orders_before
        for model in ("revenue_dt", "big_dt", "enriched_dt"):
            assert_dvs(project, dyntable_warehouse, model)

        project.run_sql(f"delete from {raw}.orders where amount < 0")
        project.run_sql(f"insert into {raw}.orders values (14, 1, 99.0)")
        node = scheduler.graph.by_model("orders_dt")
        service.recorder.schedule(node.dt, SchedulingState.ACTIVE)
        outcomes = {o.model: o.state for o in scheduler.execute(scheduler.dispatch(now_ms(), roots=roots))}
        assert {outcomes[m] for m in PIPELINE} == {"SUCCEEDED"}
        for model in PIPELINE:
            assert_dvs(project, dyntable_warehouse, model)

    def test_a_boundary_input_failing_does_not_block_its_reader(
        self, project, raw, runner, dyntable_warehouse
    ):
        scheduler, _ = runner
        lookup = scheduler.graph.by_model("lookup_dt").name
        project.run_sql(f"insert into {raw}.customers values (4, '')")
        try:
            outcomes = {
                o.model: o
                for o in scheduler.execute(
                    scheduler.dispatch(
                        now_ms(), Trigger.MANUAL, roots=[lookup, scheduler.graph.by_model("enriched_dt").name]
                    )
                )
            }
            assert outcomes["lookup_dt"].state == "FAILED"
            assert outcomes["enriched_dt"].state == "SUCCEEDED"  # read lookup_dt's last version
            lookup_front = metadata(dyntable_warehouse).frontier(lookup)
            enriched = metadata(dyntable_warehouse).frontier(f"{project.test_schema}.enriched_dt")
            assert enriched.data_timestamp > lookup_front.data_timestamp
            assert_dvs(project, dyntable_warehouse, "enriched_dt")
        finally:
            project.run_sql(f"delete from {raw}.customers where name = ''")

    def test_a_busy_dt_is_skipped_with_a_history_row(self, project, raw, runner, dyntable_warehouse):
        scheduler, _ = runner
        roots = [scheduler.graph.by_model("big_dt").name]
        slow = scheduler.dispatch(now_ms(), roots=roots)
        outcomes = {
            o.model: o.state for o in scheduler.execute(scheduler.dispatch(now_ms() + 1, roots=roots))
        }
        assert outcomes["orders_dt"] == "SKIPPED"
        assert rows_by_name(dyntable_warehouse, project, "orders_dt")[-1].state_message == (
            "its previous refresh is still running"
        )
        assert {o.state for o in scheduler.execute(slow)} == {"SUCCEEDED"}
