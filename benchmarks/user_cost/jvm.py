"""JVM Spark's measurements at one fact size: the project with `method: session`, its sources built
by `dbt run-operation`, the DTs and the hand-written merge model timed in the same `dbt run`s."""

from __future__ import annotations

import os

from benchmarks.fact_project import FactProject, FactWriter
from benchmarks.user_cost.models import actions_after_a_change
from benchmarks.user_cost.parameters import ALONE, HAND_WRITTEN, HEADLINE_MODELS, INSERTED
from benchmarks.user_cost.recorder import Recorder
from benchmarks.user_cost.results import Invocation


def measure_jvm(recorder: Recorder, project: FactProject) -> None:
    command = project.run("dbt", "run-operation", "load_bench")
    # The load average at its end, unlike the other commands' (at their start): as it was recorded.
    load = os.getloadavg()[0]
    recorder.results.invocations.append(
        Invocation("jvm", project.rows, "load the fact", "dbt run-operation load_bench", command.wall, load)
    )
    recorder.say(project, f"fact loaded by dbt run-operation: {command.wall:.0f} s")
    writer = FactWriter(project.fact_location(), project.rows)
    dts = project.dynamic_tables
    recorder.dbt_run(project, "create", expect={m: "REINITIALIZE" for m in dts})
    recorder.dbt_run(project, "no-data", expect={m: "NO_DATA" for m in dts})
    writer.insert(INSERTED)
    recorder.dbt_run(project, "incremental", expect=actions_after_a_change(dts))
    # Each alone in its `dbt run` (`--select`), as a user refreshing one model runs it: its
    # statements are the first of a fresh driver. Each reads the same 1,000 new rows.
    writer.insert(INSERTED)
    for model, action in ((HEADLINE_MODELS[0], "INCREMENTAL"), (HAND_WRITTEN, "MERGE")):
        recorder.dbt_run(project, ALONE, "--select", model, expect={model: action})
