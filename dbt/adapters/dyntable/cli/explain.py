"""`dyntable explain`, `verify` and `report`: how a dynamic table refreshes, whether it equals its
query, and the lag report page."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from typing_extensions import Annotated

from dbt.adapters.dyntable.cli.base import (
    EXIT_FAILED,
    ProfilesDir,
    ProjectDir,
    Target,
    app,
    fail,
    load,
    metadata_checked,
    model_in_service,
)
from dbt.adapters.dyntable.cli.output import clock_text, console
from dbt.adapters.dyntable.dynamic_table.config import VERIFY_MODES
from dbt.adapters.dyntable.dynamic_table.refresh.apply import FULL_REFRESH_FIX
from dbt.adapters.dyntable.runner.live import build_snapshot
from dbt.adapters.dyntable.runner.report import render_report


@app.command()
@metadata_checked
def explain(
    model: Annotated[str, typer.Argument(help="The dynamic table.")],
    project_dir: ProjectDir = Path("."),
    profiles_dir: ProfilesDir = None,
    target: Target = None,
) -> None:
    """How a dynamic table refreshes: its differentiation plan, or why it refreshes FULL."""
    _, node, service = model_in_service(model, project_dir, profiles_dir, target)
    try:
        report_text = service.explain(node.dt)
    except Exception as exc:  # noqa: BLE001 - one clear error naming the model
        fail(f"{node.model}: {exc}")
    console.print(report_text, markup=False, highlight=False)


@app.command()
@metadata_checked
def verify(
    model: Annotated[str, typer.Argument(help="The dynamic table.")],
    project_dir: ProjectDir = Path("."),
    profiles_dir: ProfilesDir = None,
    target: Target = None,
    mode: Annotated[
        Optional[str],
        typer.Option("--mode", help="full (every row) or sample; default: its verify config, else full."),
    ] = None,
) -> None:
    """Compare a dynamic table with its query at its data timestamp (an order-independent hash of
    its rows); exit 1 when they differ or cannot be compared."""
    if mode is not None and mode not in VERIFY_MODES:
        fail(f"--mode {mode!r} is not one of {', '.join(VERIFY_MODES)}.")
    _, node, service = model_in_service(model, project_dir, profiles_dir, target)
    chosen = mode or node.dt.config.verify or "full"
    with console.status(f"Verifying {node.model} ({chosen})…"):
        try:
            check = service.verify(node.dt, chosen)
        except Exception as exc:  # noqa: BLE001 - one clear error naming the model
            fail(f"{node.model}: {exc}", EXIT_FAILED)
    at = f" at {clock_text(check.frontier.data_timestamp)} UTC" if check.frontier else ""
    if check.ok:
        console.print(f"{node.model} ({node.name}) equals its query{at}: {escape(check.detail)}.")
        return
    fix = f" {FULL_REFRESH_FIX.replace('<model>', node.model)}" if check.compared else ""
    fail(f"{node.model} ({node.name}){at}: {check.detail}.{fix}", EXIT_FAILED)


@app.command()
@metadata_checked
def report(
    project_dir: ProjectDir = Path("."),
    profiles_dir: ProfilesDir = None,
    target: Target = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Where to write the page.")] = None,
) -> None:
    """Write an HTML page: the graph, and per DT its lag over time against its target lag and its
    refresh durations (the live page's charts)."""
    loaded, graph = load(project_dir, profiles_dir, target)
    metadata = loaded.metadata()
    snapshot = build_snapshot(
        graph,
        metadata.frontiers(),
        metadata.graph(),
        metadata.history(),
        datetime.now(timezone.utc).timestamp(),
    )
    page = render_report(snapshot, title=f"dyntable report · {loaded.options.project_dir.name}")
    path = output or (loaded.options.project_dir / "target" / "dyntable_report.html")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page)
    console.print(f"Wrote {path}")
