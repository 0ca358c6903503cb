"""The history phase: the headline DTs refreshed a thousand times, one runner tick at a time, as
`dyntable run` would over a long day; then what the warehouse holds, what a long-running user has."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Tuple

from benchmarks.dbt_project import META_SCHEMA, REFRESH_HISTORY, RunnerTicks
from benchmarks.fact_project import DT_SCHEMA, FactProject, FactWriter
from benchmarks.user_cost.parameters import CHANGE_EVERY, COMMIT_ROWS, COMMITS, HISTORY_MODELS
from benchmarks.user_cost.recorder import Recorder
from benchmarks.user_cost.results import HistoryState

if TYPE_CHECKING:
    from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService
    from dbt.adapters.dyntable.runner.project import LoadedProject

FRONTIERS = "dynamic_table_frontiers"


def refreshes_so_far(project: FactProject) -> int:
    """How many refreshes of the first headline DT its history holds."""
    target = f"{DT_SCHEMA}.{HISTORY_MODELS[0]}"
    return [r["name"] for r in project.refresh_history(columns=["name"])].count(target)


def measure_history(
    recorder: Recorder,
    project: FactProject,
    writer: FactWriter,
    service: "DynamicTableService",
    loaded: "LoadedProject",
    refreshes: int,
) -> None:
    """Refresh the headline DTs until each has ``refreshes`` refreshes in its history, one runner
    tick at a time (each tick one metadata batch, as `dyntable run` does)."""
    from deltalake import DeltaTable

    headline = RunnerTicks(service, [n for n in loaded.nodes if n.model in HISTORY_MODELS])
    done = refreshes_so_far(project)
    ticks = max(0, refreshes - done)
    started = time.perf_counter()
    tick_times = tick_history(recorder, project, writer, headline, done, ticks)
    # The fact now holds 200 small appended files. A table under scheduled maintenance is
    # compacted; without it every scan reads them all and the comparison below would measure
    # the source's fragmentation (the hand-written model in it is the control). Compacting
    # everything into one file would measure a scan that lost its parallelism instead.
    DeltaTable(str(project.fact_location())).optimize.compact(target_size=writer.loaded_file_bytes)
    # Catch every other DT up in one tick, so the next dbt run is NO_DATA for all of them.
    RunnerTicks(service, loaded.nodes).tick()
    seconds = time.perf_counter() - started
    state = warehouse_state(project, ticks, seconds)
    state.tick_times = tick_times
    recorder.results.histories.append(state)
    recorder.say(project, f"history: {ticks} ticks in {state.seconds:.0f} s")


def tick_history(
    recorder: Recorder, project: FactProject, writer: FactWriter, headline: RunnerTicks, done: int, ticks: int
) -> List[Tuple[int, str, float]]:
    """``ticks`` ticks, source commits before every CHANGE_EVERY-th: per tick, the refreshes so
    far, the action and the median refresh seconds."""
    tick_times = []
    for tick in range(ticks):
        if tick % CHANGE_EVERY == 0:
            for _ in range(COMMITS):
                writer.insert(COMMIT_ROWS)
        wall = time.perf_counter()
        outcomes = headline.tick()
        wall = time.perf_counter() - wall
        bad = [o for o in outcomes if str(o.state) != "SUCCEEDED"]
        if bad:
            raise RuntimeError(f"history tick {tick}: {[(o.model, o.state, o.message) for o in bad]}")
        action = str(outcomes[0].action)
        tick_times.append((done + tick + 1, action, statistics.median(o.seconds for o in outcomes)))
        if tick % 100 == 99:
            recorder.say(project, f"history: {done + tick + 1} refreshes, last tick {wall * 1000:.0f} ms")
    return tick_times


def warehouse_state(project: FactProject, ticks: int, seconds: float) -> HistoryState:
    """What the metadata tables, the fact and the first headline DT hold after the phase."""
    from deltalake import DeltaTable

    meta = project.warehouse / META_SCHEMA
    dt_location = project.warehouse / DT_SCHEMA / HISTORY_MODELS[0]
    frontiers = DeltaTable(str(meta / FRONTIERS))
    tables: Dict[str, Path] = {
        "fact": project.fact_location(),
        "DT": dt_location,
        "frontiers": meta / FRONTIERS,
        "history": meta / REFRESH_HISTORY,
    }
    return HistoryState(
        project.engine,
        project.rows,
        ticks,
        seconds,
        history_rows=refreshes_so_far(project),
        frontier_commits=frontiers.version(),
        frontier_files=len(frontiers.file_uris()),
        history_files=len(DeltaTable(str(meta / REFRESH_HISTORY)).file_uris()),
        fact_version=DeltaTable(str(project.fact_location())).version(),
        dt_version=DeltaTable(str(dt_location)).version(),
        checkpoints=", ".join(
            f"{name} {len(list((path / '_delta_log').glob('*.checkpoint*')))}"
            for name, path in tables.items()
        ),
    )
