"""Benchmark 4: the runner's sustained lag under a steady ingest rate.

A pipeline of three chained DTs — staged orders (filter/project) → order facts (join with
customers) → revenue per country and day (group-by) — is kept fresh by the runner's scheduler
(the same ``Scheduler.run`` loop `dyntable run` drives, on the embedded engine, with the
canonical period unit shrunk as `--time-scale` does) while a writer thread inserts orders and
updates recent ones at a steady rate. Every refresh's data timestamp and completion time is
recorded; a DT's lag just before a refresh completes is that completion time minus the data
timestamp of its previous successful refresh (the most it was behind), reported as max and p50
against the target lag.

    .venv/bin/python -m benchmarks.runner_lag [--seconds 60]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from rich.console import Console
from rich.progress import Progress

from benchmarks.common import (
    RESULTS,
    Goal,
    Timing,
    docstring_paragraphs,
    embedded_engine,
    markdown_table,
    pyplot,
    timed,
    write_results,
)
from dbt.adapters.dyntable.dynamic_table.config import DynamicTableConfig, TargetLag
from dbt.adapters.dyntable.dynamic_table.lifecycle import RefreshRequest, Trigger
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.refresh import RefreshResult
from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService
from dbt.adapters.dyntable.engines.base import Engine
from dbt.adapters.dyntable.runner.graph import GraphNode, build_graph
from dbt.adapters.dyntable.runner.scheduler import Scheduler, SystemClock

SCHEMA = "pipeline"
UNIT_MS = 1_500
INITIAL_ORDERS = 500_000
INSERTS_PER_SECOND = 2_000
UPDATE_EVERY_SECONDS = 5
UPDATED_ROWS = 500
MODELS = {
    "stg_orders": (
        "6 seconds",
        f"""
        select id, customer_id, upper(channel) as channel, amount, order_date
        from {SCHEMA}.raw_orders where amount > 1""",
    ),
    "order_facts": (
        "downstream",
        f"""
        select o.id, o.amount, o.order_date, c.country, concat(c.country, '-', o.channel) as market
        from {SCHEMA}.stg_orders as o join {SCHEMA}.customers as c on c.customer_id = o.customer_id""",
    ),
    "revenue_by_country_day": (
        "12 seconds",
        f"""
        select country, order_date, count(*) as orders, sum(amount) as revenue
        from {SCHEMA}.order_facts group by country, order_date""",
    ),
}


@dataclass
class Refresh:
    name: str
    data_timestamp: datetime
    finished: float
    action: Optional[str]
    state: str
    message: str


class RecordingService(DynamicTableService):
    """The runner's dynamic tables, recording when each refresh finished and the data timestamp it
    reached."""

    def __init__(self, engine: Engine, warehouse: Path) -> None:
        super().__init__(engine, warehouse, "dyntable_meta")
        self.refreshes: List[Refresh] = []

    def refresh(self, dt: DynamicTable, request: RefreshRequest) -> RefreshResult:
        data_timestamp = request.data_timestamp
        try:
            result = super().refresh(dt, request)
        except Exception as exc:
            self.refreshes.append(
                Refresh(dt.name, data_timestamp, time.time(), None, "FAILED", str(exc).splitlines()[0])
            )
            raise
        self.refreshes.append(
            Refresh(
                dt.name,
                result.data_timestamp or data_timestamp,
                time.time(),
                result.action,
                result.state,
                result.reason,
            )
        )
        return result


@dataclass
class LagRun:
    """What a run recorded: every refresh, the ticks, the writer's commits, the run's cost, and per
    DT its period and target lag."""

    refreshes: List[Refresh]
    ticks: int
    commits: int
    timing: Timing
    periods: Dict[str, float]
    target_lags: Dict[str, TargetLag]


def orders(start: int, end: int) -> str:
    return (
        f"SELECT id, cast(id * 7919 % 10000 as bigint) AS customer_id, "
        "element_at(array('web','store'), cast(id % 2 + 1 as int)) AS channel, "
        "cast(id * 31 % 1000 as double) / 10 AS amount, "
        f"date_add(date '2026-01-01', cast(id / 50000 as int)) AS order_date FROM range({start}, {end})"
    )


class Writer(threading.Thread):
    """Inserts INSERTS_PER_SECOND orders a second and updates recent ones every few seconds."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(name="bench-writer", daemon=True)
        self.engine = engine
        self.stop_event = threading.Event()
        self.next_id = INITIAL_ORDERS
        self.commits = 0
        self.error: Optional[BaseException] = None

    def run(self) -> None:
        started = time.monotonic()
        tick = 0
        try:
            while not self.stop_event.wait(max(0.0, started + tick - time.monotonic())):
                tick += 1
                self.engine.execute(
                    f"INSERT INTO {SCHEMA}.raw_orders "
                    f"{orders(self.next_id, self.next_id + INSERTS_PER_SECOND)}"
                ).collect()
                self.next_id += INSERTS_PER_SECOND
                self.commits += 1
                if tick % UPDATE_EVERY_SECONDS == 0:
                    self.engine.execute(
                        f"UPDATE {SCHEMA}.raw_orders SET amount = amount + 1 "
                        f"WHERE id >= {self.next_id - UPDATED_ROWS * 4} AND id % 4 = 0"
                    ).collect()
                    self.commits += 1
        except BaseException as exc:  # noqa: BLE001 - reported by the benchmark
            self.error = exc


def create_sources(engine: Engine) -> None:
    engine.execute(f"CREATE SCHEMA {SCHEMA}").collect()
    engine.execute(f"CREATE TABLE {SCHEMA}.raw_orders USING delta AS {orders(0, INITIAL_ORDERS)}").collect()
    engine.execute(
        f"CREATE TABLE {SCHEMA}.customers USING delta AS SELECT id AS customer_id, "
        "element_at(array('GB','US','NL','DE','JP'), cast(id % 5 + 1 as int)) AS country "
        "FROM range(10000)"
    ).collect()


def pipeline_nodes() -> List[GraphNode]:
    """The three DTs, each reading the tables and DTs its query names."""
    nodes = []
    for name, (lag, sql) in MODELS.items():
        config = DynamicTableConfig.from_model(name, {"target_lag": lag, "refresh_mode": "auto"})
        upstream = frozenset(f"{SCHEMA}.{u}" for u in MODELS if f"{SCHEMA}.{u} " in sql + " ")
        nodes.append(GraphNode(name, DynamicTable(SCHEMA, name, sql, config), upstream))
    return nodes


def run(engine: Engine, warehouse: Path, seconds: float, console: Console) -> LagRun:
    create_sources(engine)
    backend = RecordingService(engine, warehouse)
    nodes = pipeline_nodes()
    graph = build_graph(nodes, unit_ms=UNIT_MS)
    scheduler = Scheduler(graph, backend)
    # Build the pipeline once, as `dbt run` would before the runner starts.
    scheduler.execute(scheduler.dispatch(int(time.time() * 1000), trigger=Trigger.MANUAL, roots=graph.order))
    backend.refreshes.clear()
    writer = Writer(engine)
    ticks, timing = ingest_and_schedule(scheduler, writer, seconds, console)
    if writer.error is not None:
        raise RuntimeError(f"the writer failed: {writer.error}") from writer.error
    return LagRun(
        backend.refreshes,
        ticks,
        writer.commits,
        timing,
        {graph.model(n): period_seconds(graph.period_ms[n]) for n in graph.order},
        {n.model: n.dt.config.target_lag for n in nodes},
    )


def period_seconds(period_ms: Optional[int]) -> float:
    assert period_ms is not None, "every DT of the pipeline has a lag, its own or its consumers'"
    return period_ms / 1000


def ingest_and_schedule(
    scheduler: Scheduler, writer: Writer, seconds: float, console: Console
) -> Tuple[int, Timing]:
    """The writer and the runner's loop for ``seconds``, with a progress bar: the ticks it ran
    and what the run cost."""
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("benchmark 4: runner under steady ingest", total=seconds)
        stop_at = time.time() + seconds

        def show_progress() -> None:
            while time.time() < stop_at:
                progress.update(task, completed=seconds - (stop_at - time.time()))
                time.sleep(1)

        ticker = threading.Thread(target=show_progress, daemon=True)
        with timed() as timing:
            writer.start()
            ticker.start()
            ticks = scheduler.run(SystemClock(), stop_at=stop_at)
            writer.stop_event.set()
            writer.join()
    return ticks, timing


def lags(refreshes: List[Refresh], name: str) -> List[float]:
    """Seconds each refresh of ``name`` completed after its previous successful data timestamp."""
    samples, previous = [], None
    for r in sorted((r for r in refreshes if r.name == name), key=lambda r: r.finished):
        if previous is not None:
            samples.append(r.finished - previous)
        if r.state == "SUCCEEDED":
            previous = r.data_timestamp.timestamp()
    return samples


def model_lag(result: LagRun, model: str) -> Tuple[Tuple[object, ...], Goal, float]:
    """One DT's row of the table, its goal, and its effective target lag in seconds."""
    name = f"{SCHEMA}.{model}"
    samples = lags(result.refreshes, name)
    mine = [r for r in result.refreshes if r.name == name]
    failed = [r for r in mine if r.state == "FAILED"]
    lag = result.target_lags[model]
    # DOWNSTREAM takes the smallest lag of the DTs that read it.
    consumers = [m for m, (_, sql) in MODELS.items() if f"{SCHEMA}.{model} " in sql + " "]
    target = (
        lag.seconds if lag.seconds is not None else min(seconds_of(result.target_lags[m]) for m in consumers)
    )
    worst = max(samples) if samples else float("nan")
    p50 = statistics.median(samples) if samples else float("nan")
    actions: Dict[str, int] = {}
    for r in mine:
        key = r.action or r.state
        actions[key] = actions.get(key, 0) + 1
    row = (
        model,
        str(lag),
        f"{target:g}",
        f"{result.periods[model]:g}",
        len(mine),
        ", ".join(f"{k} {v}" for k, v in sorted(actions.items())),
        len(failed),
        f"{p50:.1f}",
        f"{worst:.1f}",
        "✓" if worst <= target else "✗",
    )
    goal = Goal(
        f"{model}: lag stays within its target lag ({target:g} s) under steady ingest",
        f"max {worst:.1f} s, p50 {p50:.1f} s over {len(mine)} refreshes"
        + (f", {len(failed)} failed" if failed else ""),
        bool(samples) and worst <= target,
    )
    return row, goal, target


def seconds_of(lag: TargetLag) -> float:
    assert lag.seconds is not None, "a DT read by others has a lag of its own"
    return lag.seconds


def report(result: LagRun, seconds: float, command: str) -> None:
    per_model = {model: model_lag(result, model) for model in MODELS}
    failures = sorted({r.message for r in result.refreshes if r.state == "FAILED"})
    body = [
        "## Lag per DT",
        "",
        f"{seconds:g} s of ingest: {result.commits} source commits ({INSERTS_PER_SECOND:,} inserted orders a "
        f"second onto {INITIAL_ORDERS:,}, {UPDATED_ROWS} recent orders updated every {UPDATE_EVERY_SECONDS} s); "
        f"{result.ticks} runner ticks; canonical period unit {UNIT_MS / 1000:g} s. The whole run used "
        f"{result.timing.cpu:.1f} CPU seconds in {result.timing.wall:.1f} wall seconds (engine, runner and writer).",
        "",
    ]
    header = ["DT", "target_lag", "effective target s", "period s", "refreshes", "actions", "failed"]
    header += ["lag p50 s", "lag max s", "max ≤ target"]
    body += markdown_table(header, [row for row, _, _ in per_model.values()], "llrrrlrrrl")
    if failures:
        body += ["", "Failures seen:", ""] + [f"- `{m}`" for m in failures]
    body += ["", "![plot](runner_lag.png)"]
    write_results(
        "runner_lag",
        "Benchmark 4: the runner's sustained lag under steady ingest",
        command,
        docstring_paragraphs(__doc__, 1)[0],
        [goal for _, goal, _ in per_model.values()],
        body,
    )
    plot(result.refreshes, {model: target for model, (_, _, target) in per_model.items()})


def plot(refreshes: List[Refresh], targets: Dict[str, float]) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    start = min((r.finished for r in refreshes), default=0.0)
    for model, target in targets.items():
        name = f"{SCHEMA}.{model}"
        done = sorted((r for r in refreshes if r.name == name), key=lambda r: r.finished)
        (line,) = ax.plot(
            [r.finished - start for r in done[1:]], lags(refreshes, name), marker=".", label=model
        )
        ax.axhline(target, color=line.get_color(), linestyle=":", linewidth=1)
        failed = [r.finished - start for r in done if r.state == "FAILED"]
        if failed:
            ax.plot(failed, [0] * len(failed), "x", color=line.get_color())
    ax.set_xlabel("seconds into the run (x: failed refresh)")
    ax.set_ylabel("lag at refresh completion, s (dotted: target)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(RESULTS / "runner_lag.png", dpi=100)
    plt.close(fig)


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the ingest runs")
    parser.add_argument("--full", action="store_true", help="five minutes of ingest")
    args = parser.parse_args(argv)
    seconds = 300.0 if args.full else args.seconds
    console = Console()
    with embedded_engine() as (engine, warehouse):
        result = run(engine, warehouse, seconds, console)
    command = "python -m benchmarks.runner_lag" + (" --full" if args.full else f" --seconds {seconds:g}")
    report(result, seconds, command)
    console.print(f"benchmark 4: {len(result.refreshes)} refreshes recorded")


if __name__ == "__main__":
    main()
