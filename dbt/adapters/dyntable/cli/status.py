"""`dyntable status`, `history`, `graph` and `snapshot`: what the metadata tables and the Delta
logs say of the project's dynamic tables."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import typer
from rich.markup import escape
from typing_extensions import Annotated

from dbt.adapters.dyntable.cli.base import (
    EXIT_FAILED,
    ProfilesDir,
    ProjectDir,
    Target,
    TimeScale,
    app,
    fail,
    load,
    metadata_checked,
    node_or_fail,
    start_service,
)
from dbt.adapters.dyntable.cli.output import (
    TIMES_IN_UTC,
    clock_text,
    console,
    errors,
    failures_text,
    period_text,
    seconds_text,
    styled,
    titled_table,
    verify_text,
)
from dbt.adapters.dyntable.dynamic_table.lifecycle import SchedulingState
from dbt.adapters.dyntable.dynamic_table.metadata import GraphRow, HistoryRow
from dbt.adapters.dyntable.dynamic_table.refresh.decide import CLOCK_SKEW
from dbt.adapters.dyntable.dynamic_table.snapshot import NoCommonSnapshot, common_snapshot
from dbt.adapters.dyntable.runner.graph import DynamicTableGraph
from dbt.adapters.dyntable.runner.live import target_lag_text
from dbt.adapters.dyntable.vocabulary import quoted_table

#: How many of a DT's most recent refreshes `dyntable history` shows unless told (``--limit``).
HISTORY_ROWS = 20

STATUS_COLUMNS = (
    "dynamic table",
    "target lag",
    "period",
    "data timestamp",
    "current lag",
    "state",
    "last action",
    "verify",
    "failures",
)


def _latest_history(history: List[HistoryRow]) -> Dict[str, HistoryRow]:
    return {row.name: row for row in history}


@app.command()
@metadata_checked
def status(
    project_dir: ProjectDir = Path("."),
    profiles_dir: ProfilesDir = None,
    target: Target = None,
    time_scale: TimeScale = 1.0,
) -> None:
    """Every dynamic table: lag, chosen period, data timestamp, state, last action, failures."""
    loaded, graph = load(project_dir, profiles_dir, target, time_scale=time_scale)
    metadata = loaded.metadata()
    frontiers = metadata.frontiers()
    graph_rows = metadata.graph()
    everything = metadata.history()
    latest = _latest_history(everything)
    checked = _latest_history([row for row in everything if row.verified])
    now = datetime.now(timezone.utc)
    table = titled_table("Dynamic tables", STATUS_COLUMNS, TIMES_IN_UTC)
    for name in graph.order:
        frontier = frontiers.get(name)
        table.add_row(
            *_status_row(
                graph,
                name,
                frontier.data_timestamp if frontier else None,
                graph_rows.get(name),
                latest.get(name),
                checked.get(name),
                now,
            )
        )
    if not graph.nodes:
        console.print("This project has no dynamic tables (materialized='dynamic_table').")
        return
    console.print(table)
    for name in graph.order:  # a source whose writer's clock runs ahead holds its commits back
        last = latest.get(name)
        if last is not None and CLOCK_SKEW in (last.reason or ""):
            errors.print(
                f"[yellow]Warning:[/] {graph.model(name)}: {escape(last.reason or '')}", highlight=False
            )


def _status_row(
    graph: DynamicTableGraph,
    name: str,
    data_timestamp: Optional[datetime],
    row: Optional[GraphRow],
    last: Optional[HistoryRow],
    last_verified: Optional[HistoryRow],
    now: datetime,
) -> Tuple[str, ...]:
    """One dynamic table's cells of `dyntable status` (:data:`STATUS_COLUMNS`)."""
    lag: Optional[float] = None
    if data_timestamp is not None:
        lag = (now - data_timestamp).total_seconds()
    target_seconds = graph.effective_lag[name]
    lag_cell = seconds_text(lag)
    if lag is not None and target_seconds is not None:
        lag_cell = f"[{'red' if lag > target_seconds else 'green'}]{lag_cell}[/]"
    last_cell = "-"
    if last is not None:
        last_cell = f"{last.refresh_action or '-'} {styled(last.state)}"
    return (
        graph.model(name),
        target_lag_text(graph, name),
        period_text(graph, name),
        clock_text(data_timestamp),
        lag_cell if data_timestamp is not None else "[dim]not initialized[/]",
        styled(row.scheduling_state if row else SchedulingState.ACTIVE),
        last_cell,
        verify_text(graph.nodes[name].dt.config.verify, last_verified),
        failures_text(graph, name, row),
    )


@app.command()
@metadata_checked
def history(
    model: Annotated[str, typer.Argument(help="The dynamic table.")],
    project_dir: ProjectDir = Path("."),
    profiles_dir: ProfilesDir = None,
    target: Target = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Most recent rows to show.")] = HISTORY_ROWS,
) -> None:
    """The refresh history of one dynamic table, newest last."""
    loaded, graph = load(project_dir, profiles_dir, target)
    node = node_or_fail(loaded, graph, model)
    rows = loaded.metadata().history(node.name)[-limit:]
    table = titled_table(
        f"Refresh history of {node.model} ({node.name})",
        (
            "started",
            "trigger",
            "action",
            "state",
            "data timestamp",
            "seconds",
            "+rows",
            "-rows",
            "reason / message",
        ),
        TIMES_IN_UTC,
    )
    for row in rows:
        seconds = (row.refresh_end_time - row.refresh_start_time).total_seconds()
        verified = f"verify: {row.verified}" if row.verified else ""
        detail = "; ".join(t for t in (row.reason, row.state_message, verified) if t)
        table.add_row(
            clock_text(row.refresh_start_time),
            str(row.refresh_trigger),
            str(row.refresh_action or "-"),
            styled(row.state),
            clock_text(row.data_timestamp),
            f"{seconds:.2f}",
            str(row.rows_inserted or 0),
            str(row.rows_deleted or 0),
            escape(detail),
        )
    if not rows:
        console.print(f"No refresh of {node.model} recorded yet.")
        return
    console.print(table)


@app.command(name="graph")
@metadata_checked
def graph_command(
    project_dir: ProjectDir = Path("."),
    profiles_dir: ProfilesDir = None,
    target: Target = None,
) -> None:
    """The graph history's latest row per dynamic table, with the project's pipeline edges."""
    loaded, graph = load(project_dir, profiles_dir, target)
    rows = loaded.metadata().graph()
    table = titled_table(
        "Dynamic-table graph",
        (
            "dynamic table",
            "state",
            "failures",
            "target lag",
            "inputs (tables read)",
            "pipeline upstream",
            "across a boundary",
            "recorded",
        ),
        TIMES_IN_UTC,
    )
    names = list(graph.order) + sorted(set(rows) - set(graph.nodes))
    for name in names:
        row, node = rows.get(name), graph.nodes.get(name)
        table.add_row(
            node.model if node else f"{name} [dim](not in project)[/]",
            styled(row.scheduling_state if row else None),
            str(row.consecutive_failures) if row else "-",
            row.target_lag if row else (str(node.dt.config.target_lag) if node else "-"),
            ", ".join(row.inputs) if row and row.inputs else "-",
            ", ".join(sorted(graph.model(u) for u in node.upstream)) if node else "-",
            ", ".join(sorted(node.boundary_inputs)) if node else "-",
            clock_text(row.recorded_at if row else None),
        )
    console.print(table)


@app.command()
@metadata_checked
def snapshot(
    models: Annotated[List[str], typer.Argument(help="The dynamic tables to read together.")],
    project_dir: ProjectDir = Path("."),
    profiles_dir: ProfilesDir = None,
    target: Target = None,
) -> None:
    """The latest data timestamp these dynamic tables all hold, and the Delta version of each."""
    loaded, graph = load(project_dir, profiles_dir, target)
    nodes = [node_or_fail(loaded, graph, model) for model in models]
    service = start_service(loaded)
    try:
        common = common_snapshot(service.engine, service.metadata, [node.name for node in nodes])
    except NoCommonSnapshot as exc:
        fail(str(exc), EXIT_FAILED)
    table = titled_table(
        f"As of {common.data_timestamp:%Y-%m-%d %H:%M:%S} UTC, the latest data timestamp they all hold",
        ("dynamic table", "Delta version", "read it as"),
        escape("dyntable_consistent([ref(...), ...]) reads them so from a model or an analysis."),
    )
    for node in nodes:
        version = common.versions[node.name]
        read = f"{quoted_table(node.name)} VERSION AS OF {version}"
        log = service.engine.delta_log(node.name)
        checkpoint = log.latest_checkpoint() if log is not None else None
        if not service.engine.capabilities.time_travel_behind_checkpoint and (checkpoint or 0) > version:
            read += f" (the {service.engine.name} engine cannot read it so: use dyntable_consistent)"
        table.add_row(node.model, str(version), escape(read))
    console.print(table)
