"""What the `dyntable` runner costs on top of the refreshes themselves.

1. Pure scheduling: one tick of a 1,000-DT graph where every DT is due (the worst tick), with a
   refresh that does nothing. Target: under 1 s.
2. End to end: one tick of 20 DTs on the embedded engine where no source changed, so every
   refresh is NO_DATA (metadata reads, Delta log checks, history rows). Target: under 1 s.

    .venv/bin/python benchmarks/runner_overhead.py
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from contextlib import nullcontext
from datetime import datetime
from pathlib import Path
from typing import ContextManager, Dict, List

from dbt.adapters.dyntable.dynamic_table.config import DynamicTableConfig, TargetLag
from dbt.adapters.dyntable.dynamic_table.lifecycle import Action, DynamicTableState, RefreshRequest, State
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.refresh import RefreshResult
from dbt.adapters.dyntable.runner.graph import GraphNode, build_graph
from dbt.adapters.dyntable.runner.scheduler import Scheduler

LAGS = ["1 minute", "5 minutes", "downstream", "1 hour", "10 minutes"]


class InstantBackend:
    """Every refresh succeeds at once: what is left is the scheduler's own work."""

    def __init__(self) -> None:
        self.data_ts: Dict[str, datetime] = {}

    def states(self) -> Dict[str, DynamicTableState]:
        return {name: DynamicTableState(ts) for name, ts in self.data_ts.items()}

    def refresh(self, dt: DynamicTable, request: RefreshRequest) -> RefreshResult:
        self.data_ts[dt.name] = request.data_timestamp
        return RefreshResult(
            dt.name, Action.NO_DATA, State.SUCCEEDED, "no source changed", request.data_timestamp
        )

    def record_not_refreshed(self, *args: object) -> None:
        pass

    def record_failure(self, dt: DynamicTable) -> int:
        return 1

    def suspend(self, dt: DynamicTable) -> None:
        pass

    def batch(self) -> ContextManager[None]:
        return nullcontext()

    @property
    def interrupted(self) -> bool:
        return False


def random_graph_nodes(count: int, seed: int = 7) -> List[GraphNode]:
    """A layered DAG: each DT reads up to three earlier ones; lags never below an upstream's."""
    rng = random.Random(seed)
    nodes: List[GraphNode] = []
    lag_of: Dict[str, int] = {}
    for i in range(count):
        reads = rng.sample(range(i), k=min(i, rng.randint(0, 3))) if i else []
        floor = max([lag_of[f"b.dt{r}"] for r in reads], default=60)
        lag = rng.choice([60, 300, 600, 3600])
        lag = max(lag, floor)
        text = "downstream" if rng.random() < 0.1 and reads else f"{lag} seconds"
        config = DynamicTableConfig(TargetLag.parse(text), refresh_mode="full")
        name = f"dt{i}"
        # A DOWNSTREAM DT's consumers must still not be faster than what it reads: record the
        # strictest lag it passes on.
        lag_of[f"b.{name}"] = lag if text != "downstream" else floor
        nodes.append(
            GraphNode(
                name,
                DynamicTable("b", name, "select 1", config),
                upstream=frozenset(f"b.dt{r}" for r in reads),
            )
        )
    return nodes


def bench_scheduling(count: int = 1000, ticks: int = 5) -> float:
    nodes = random_graph_nodes(count)
    started = time.perf_counter()
    graph = build_graph(nodes)
    build = time.perf_counter() - started
    timings = []
    refreshed = 0
    for i in range(ticks):
        backend = InstantBackend()  # nothing refreshed yet: every DT is due at this tick
        scheduler = Scheduler(graph, backend)
        tick_ms = (1_800_000_000_000 // 3_072_000 + i) * 3_072_000
        started = time.perf_counter()
        outcomes = scheduler.execute(scheduler.dispatch(tick_ms))
        timings.append(time.perf_counter() - started)
        refreshed = len(outcomes)
        assert refreshed == sum(1 for n in graph.order if graph.period_ms[n] is not None)
    print(
        f"scheduling, {count} DTs: graph build {build * 1000:.1f} ms; "
        f"a tick refreshing {refreshed} of them {statistics.median(timings) * 1000:.1f} ms "
        f"(median of {ticks}; target < 1000 ms)"
    )
    return statistics.median(timings)


def bench_no_data_tick(count: int = 20, ticks: int = 10) -> float:
    from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService
    from dbt.adapters.dyntable.engines.embedded import EmbeddedEngine

    with tempfile.TemporaryDirectory() as folder:
        engine = EmbeddedEngine(Path(folder) / "warehouse").start()
        try:
            engine.execute("create schema if not exists bench")
            engine.execute("create table bench.raw (id bigint, grp bigint, v double) using delta")
            engine.execute("insert into bench.raw select id, id % 10, id * 1.5 from range(1000)")
            service = DynamicTableService(engine, Path(folder) / "warehouse", "dyntable_meta")
            nodes = []
            for i in range(count):
                # half read the raw table, half aggregate one of the first half
                upstream = f"bench.dt{i - count // 2}" if i >= count // 2 else None
                sql = (
                    f"select grp, sum(v) as total from {upstream} group by grp"
                    if upstream
                    else f"select id, grp, v from bench.raw where grp = {i % 10}"
                )
                config = DynamicTableConfig(TargetLag.parse("1 minute"), refresh_mode="full")
                dt = DynamicTable("bench", f"dt{i}", sql, config)
                nodes.append(GraphNode(f"dt{i}", dt, frozenset([upstream] if upstream else [])))
            graph = build_graph(nodes)
            scheduler = Scheduler(graph, service)
            first = int(time.time() * 1000)
            scheduler.execute(scheduler.dispatch(first, roots=graph.order))  # initialize
            # Warm-up tick: the engine's first catalog lookups of each table are slower.
            scheduler.execute(scheduler.dispatch(int(time.time() * 1000), roots=graph.order))
            timings = []
            for _ in range(ticks):
                started = time.perf_counter()
                outcomes = scheduler.execute(scheduler.dispatch(int(time.time() * 1000), roots=graph.order))
                timings.append(time.perf_counter() - started)
                actions = {o.action for o in outcomes}
                assert actions == {"NO_DATA"}, [(o.model, o.state, o.message) for o in outcomes]
            print(
                f"end to end, {count} DTs, all NO_DATA, embedded engine: a tick "
                f"{statistics.median(timings) * 1000:.0f} ms (median of {ticks}; "
                f"min {min(timings) * 1000:.0f} ms; target < 1000 ms)"
            )
            return statistics.median(timings)
        finally:
            engine.stop()


def main() -> None:
    from benchmarks.common import Goal, write_results

    scheduling = bench_scheduling()
    no_data = bench_no_data_tick()
    write_results(
        "runner_overhead",
        "Runner overhead",
        "python -m benchmarks.runner_overhead",
        " ".join((__doc__ or "").split("\n\n")[1].split()),
        [
            Goal(
                "a scheduling tick of 1,000 due DTs (instant refreshes) under 1 s",
                f"{scheduling * 1000:.1f} ms (median of 5)",
                scheduling < 1,
            ),
            Goal(
                "a tick of 20 DTs that are all NO_DATA, embedded engine, under 1 s",
                f"{no_data * 1000:.0f} ms (median of 10; {no_data / 20 * 1000:.0f} ms a DT)",
                no_data < 1,
            ),
        ],
        [],
    )


if __name__ == "__main__":
    main()
