"""The embedded engine's measurements at one fact size: `dbt run` with no change and after inserts,
the insert-only sweep, `--full-refresh`, `dyntable run --once`, the same DTs in-process, and after
the history phase the comparison with a copy of the project taken after one refresh."""

from __future__ import annotations

import shutil
from typing import Dict, Optional

from benchmarks.fact_project import FactProject, FactWriter
from benchmarks.user_cost.in_process import measure_in_process
from benchmarks.user_cost.models import actions_after_a_change
from benchmarks.user_cost.parameters import (
    AFTER_MANY,
    AFTER_ONE,
    AFTER_ONE_IN_TURNS,
    DBT_RUNS,
    HEADLINE_MODELS,
    HISTORY_NO_DATA_RUNS,
    INSERTED,
    NO_DATA_DBT_RUNS,
    SWEEP_FRACTION,
)
from benchmarks.user_cost.recorder import Recorder


def measure_embedded(recorder: Recorder, project: FactProject, history_refreshes: Optional[int]) -> None:
    """Every embedded measurement of ``project``; the history phase up to ``history_refreshes``
    refreshes and the comparison after it, unless None."""
    project.load_embedded()
    recorder.say(project, "fact loaded")
    writer = FactWriter(project.fact_location(), project.rows)
    dts = project.dynamic_tables
    recorder.dbt_run(project, "create", expect={m: "REINITIALIZE" for m in dts})
    changed = actions_after_a_change(dts)
    dbt_runs(recorder, project, writer, changed)
    history = history_refreshes is not None
    earlier = project.copy(project.root.with_name(project.root.name + "-after-1")) if history else None
    sweep_rows = int(project.rows * SWEEP_FRACTION)
    if sweep_rows != INSERTED:
        for _ in range(DBT_RUNS):
            writer.insert(sweep_rows)
            recorder.dbt_run(project, "sweep", expect=changed)
    recorder.dbt_run(
        project,
        "full-refresh",
        "--full-refresh",
        "--select",
        HEADLINE_MODELS[0],
        expect={HEADLINE_MODELS[0]: "REINITIALIZE"},
    )
    recorder.runner_once(project, "no-data", {m: "NO_DATA" for m in dts})
    writer.insert(INSERTED)
    recorder.runner_once(project, "incremental", changed)
    measure_in_process(recorder, project, writer, history_refreshes)
    if earlier is not None:
        try:
            in_turns(recorder, earlier, project, writer, changed)
        finally:
            shutil.rmtree(earlier.root, ignore_errors=True)


def dbt_runs(
    recorder: Recorder,
    project: FactProject,
    writer: FactWriter,
    changed: Dict[str, str],
    history: str = AFTER_ONE,
) -> None:
    """``NO_DATA_DBT_RUNS`` whole-project runs with no change, then ``DBT_RUNS`` after an insert."""
    for _ in range(NO_DATA_DBT_RUNS):
        recorder.dbt_run(project, "no-data", expect={m: "NO_DATA" for m in changed}, history=history)
    for _ in range(DBT_RUNS):
        writer.insert(INSERTED)
        recorder.dbt_run(project, "incremental", expect=changed, history=history)


def in_turns(
    recorder: Recorder, earlier: FactProject, later: FactProject, writer: FactWriter, changed: Dict[str, str]
) -> None:
    """The history comparison: ``earlier`` (the project copied at AFTER_ONE) and ``later`` (at
    AFTER_MANY) in turns, each whole-project run of one beside one of the other, the first of
    the pair alternating; each INCREMENTAL run after the same insert into its own fact."""
    earlier_writer = FactWriter(earlier.fact_location(), writer.next_id)
    pair = [(earlier, earlier_writer, AFTER_ONE_IN_TURNS), (later, writer, AFTER_MANY)]
    no_data = {m: "NO_DATA" for m in changed}
    for runs, run, expect, inserted in (
        (HISTORY_NO_DATA_RUNS, "no-data", no_data, 0),
        (DBT_RUNS, "incremental", changed, INSERTED),
    ):
        for turn in range(runs):
            for project, fact, history in pair if turn % 2 == 0 else pair[::-1]:
                if inserted:
                    fact.insert(inserted)
                recorder.dbt_run(project, run, expect=expect, history=history)
