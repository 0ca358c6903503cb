"""Running the project's commands as users run them, and recording each model's time."""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any, Dict, List, Optional

from rich.console import Console

from benchmarks.common import say
from benchmarks.dbt_project import ModelRun
from benchmarks.fact_project import FactProject
from benchmarks.user_cost.parameters import AFTER_ONE
from benchmarks.user_cost.results import Invocation, Measure, Results


def jobs_during(result: ModelRun, starts: Optional[List[datetime]]) -> Optional[int]:
    """How many of the jobs started while dbt executed the model of ``result``."""
    window = result.execute_window
    if starts is None or window is None:
        return None
    began, ended = window
    return sum(began <= start <= ended for start in starts)


def action_of(result: ModelRun) -> str:
    """What a model did: a DT's refresh action, from its adapter message; the merge model's MERGE."""
    if not result.model.startswith("dt_"):
        return "MERGE"
    return result.adapter_message.split()[0] if result.adapter_message else "?"


def refresh_seconds(row: Dict[str, Any]) -> float:
    """A refresh history row's duration: the refresh's own time."""
    return float((row["refresh_end_time"] - row["refresh_start_time"]).total_seconds())


class Recorder:
    """Runs `dbt run` and `dyntable run --once` on a project and records every model's time."""

    def __init__(self, results: Results, console: Console) -> None:
        self.results, self.console = results, console

    def say(self, project: FactProject, text: str) -> None:
        say(self.console, f"{project.engine}, {project.rows:,} rows: {text}")

    def dbt_run(
        self,
        project: FactProject,
        run: str,
        *args: str,
        expect: Optional[Dict[str, str]] = None,
        history: str = AFTER_ONE,
        record: bool = True,
    ) -> None:
        """`dbt run`; each DT model's time (and its refresh's own time) recorded as ``run``.
        ``expect``: model → action it must have taken (the measurement means nothing otherwise)."""
        load = os.getloadavg()[0]
        command, results = project.dbt("run", *args)
        self.results.invocations.append(
            Invocation(
                project.engine,
                project.rows,
                f"{run} ({history})",
                "dbt run " + " ".join(args),
                command.wall,
                load,
            )
        )
        job_starts = project.job_starts(command.started_at) if project.engine == "jvm" else None
        refreshed = {r["name"].split(".")[-1]: r for r in self._history_since(project, command.started_at)}
        first = True
        for result in results:
            action = action_of(result)
            if result.status != "success":
                raise RuntimeError(f"{result.model}: {result.status}: {result.message}")
            if expect and result.model in expect and action != expect[result.model]:
                raise RuntimeError(
                    f"{run}: {result.model} took {action}, expected {expect[result.model]} "
                    f"({result.adapter_message})"
                )
            is_dt = result.model.startswith("dt_")
            if record:
                own = refreshed.get(result.model) if is_dt else None
                self.results.measures.append(
                    Measure(
                        project.engine,
                        project.rows,
                        "dbt",
                        run,
                        history,
                        result.model,
                        action,
                        result.execution_time,
                        refresh_seconds(own) if own else None,
                        first and is_dt,
                        jobs_during(result, job_starts),
                    )
                )
            first = first and not is_dt
        self.say(project, f"dbt run {' '.join(args)} ({run}, {history}): {command.wall:.1f} s")

    def runner_once(self, project: FactProject, run: str, expect: Dict[str, str]) -> None:
        """`dyntable run --once`; each DT's refresh time, from the refresh history, as ``run``."""
        load = os.getloadavg()[0]
        command = project.run("dyntable", "run", "--once")
        self.results.invocations.append(
            Invocation(
                project.engine, project.rows, f"runner {run}", "dyntable run --once", command.wall, load
            )
        )
        for number, row in enumerate(self._history_since(project, command.started_at)):
            model = row["name"].split(".")[-1]
            if model in expect and row["refresh_action"] != expect[model]:
                raise RuntimeError(
                    f"runner {run}: {model} took {row['refresh_action']}, expected {expect[model]}"
                )
            self.results.measures.append(
                Measure(
                    project.engine,
                    project.rows,
                    "runner",
                    run,
                    AFTER_ONE,
                    model,
                    row["refresh_action"],
                    refresh_seconds(row),
                    None,
                    number == 0,
                )
            )
        self.say(project, f"dyntable run --once ({run}): {command.wall:.1f} s")

    @staticmethod
    def _history_since(project: FactProject, since: datetime) -> List[Dict[str, Any]]:
        columns = ["name", "state", "refresh_action", "refresh_start_time", "refresh_end_time"]
        return project.refresh_history(since, columns)
