"""`dyntable refresh`, `suspend` and `resume`: a manual refresh and the scheduling state of one
dynamic table."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from typing_extensions import Annotated

from dbt.adapters.dyntable.cli.base import (
    EXIT_FAILED,
    ProfilesDir,
    ProjectDir,
    Target,
    app,
    metadata_checked,
    model_in_service,
)
from dbt.adapters.dyntable.cli.output import clock_text, console, outcome_table
from dbt.adapters.dyntable.dynamic_table.lifecycle import State
from dbt.adapters.dyntable.runner import control
from dbt.adapters.dyntable.runner.scheduler import Scheduler


@app.command()
@metadata_checked
def refresh(
    model: Annotated[str, typer.Argument(help="The dynamic table (model name or schema.table).")],
    project_dir: ProjectDir = Path("."),
    profiles_dir: ProfilesDir = None,
    target: Target = None,
) -> None:
    """Refresh one dynamic table now, at a new data timestamp, with the DTs it reads."""
    graph, node, service = model_in_service(model, project_dir, profiles_dir, target)
    scheduler = Scheduler(graph, service)
    plan = control.manual_refresh(scheduler, node)
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task(f"Refreshing {node.model}", total=len(plan.members))
        outcomes = scheduler.execute(
            plan, on_outcome=lambda o: progress.update(task, advance=1, description=o.model)
        )
    console.print(outcome_table(f"Manual refresh at {clock_text(plan.data_timestamp)}", outcomes))
    mine = next(o for o in outcomes if o.name == node.name)
    if mine.state is not State.SUCCEEDED:
        raise typer.Exit(EXIT_FAILED)


@app.command()
@metadata_checked
def suspend(
    model: Annotated[str, typer.Argument(help="The dynamic table to suspend.")],
    project_dir: ProjectDir = Path("."),
    profiles_dir: ProfilesDir = None,
    target: Target = None,
) -> None:
    """Stop scheduled refreshes of a dynamic table (manual refreshes still work)."""
    _, node, service = model_in_service(model, project_dir, profiles_dir, target)
    console.print(control.suspend(service.recorder, node))


@app.command()
@metadata_checked
def resume(
    model: Annotated[str, typer.Argument(help="The dynamic table to resume.")],
    project_dir: ProjectDir = Path("."),
    profiles_dir: ProfilesDir = None,
    target: Target = None,
    accept_change: Annotated[
        bool,
        typer.Option("--accept-change", help="Let its next refresh exceed max_change_ratio/max_change_rows."),
    ] = False,
) -> None:
    """Schedule a suspended dynamic table again, with a clean failure count."""
    _, node, service = model_in_service(model, project_dir, profiles_dir, target)
    console.print(control.resume(service.recorder, node, accept_change))
