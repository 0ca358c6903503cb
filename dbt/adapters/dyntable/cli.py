"""The `dyntable` command: keeps a dbt project's dynamic tables within their target lag.

    dyntable run [--once | --for 2m] [--time-scale 0.05]     the scheduler
    dyntable run --ui [--ui-port 8765] [--log-format json]    ... with its live page and /metrics
    dyntable ui                                               the live page beside a running runner
    dyntable refresh MODEL                                    a manual refresh (upstream DTs too)
    dyntable suspend|resume MODEL
    dyntable status | graph | history MODEL | explain MODEL | report
    dyntable verify MODEL [--mode full|sample]                the table against its query
    dyntable snapshot MODEL...                                the DTs' latest common data timestamp
    dyntable repair                                           rebuild metadata tables, find damaged DTs

It works on a dbt project as dbt does (--project-dir, --profiles-dir, --target, --select), parses
and compiles it once through dbt's Python API, then refreshes through one warm engine.

Exit codes: 0 success, or a runner stopped by SIGTERM or SIGINT within --stop-timeout; 1 a
refresh failed or a metadata table is damaged; 2 bad input (project, profile, graph, model name),
in which case nothing was refreshed; 128 + the signal when a stop is forced (a second signal, or
past --stop-timeout).
"""

from __future__ import annotations

import functools
import os
import re
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Dict, List, NoReturn, Optional, Sequence, Tuple, Union

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from typing_extensions import Annotated

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.dynamic_table.config import VERIFY_MODES
from dbt.adapters.dyntable.dynamic_table.lifecycle import SchedulingState, State
from dbt.adapters.dyntable.dynamic_table.metadata import GraphRow, HistoryRow, MetadataDamaged, MetadataStore
from dbt.adapters.dyntable.dynamic_table.refresh.apply import FULL_REFRESH_FIX
from dbt.adapters.dyntable.dynamic_table.refresh.damaged import rebuild_command
from dbt.adapters.dyntable.dynamic_table.refresh.decide import CLOCK_SKEW
from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService
from dbt.adapters.dyntable.dynamic_table.snapshot import NoCommonSnapshot, common_snapshot
from dbt.adapters.dyntable.engines.warehouse import Warehouse
from dbt.adapters.dyntable.runner import control
from dbt.adapters.dyntable.runner.backend import ServiceBackend
from dbt.adapters.dyntable.runner.graph import (
    CANONICAL_UNIT_MS,
    DynamicTableGraph,
    GraphError,
    GraphNode,
    build_graph,
)
from dbt.adapters.dyntable.runner.live import build_snapshot, target_lag_text
from dbt.adapters.dyntable.runner.project import LoadedProject, ProjectError, ProjectOptions, load_project
from dbt.adapters.dyntable.runner.report import render_report
from dbt.adapters.dyntable.runner.scheduler import (
    DynamicTableState,
    Outcome,
    Scheduler,
    from_ms,
)
from dbt.adapters.dyntable.runner.web.auth import TOKEN_ENV
from dbt.adapters.dyntable.table_damage import damage
from dbt.adapters.dyntable.vocabulary import quoted_table

app = typer.Typer(
    name="dyntable",
    help="Keep a dbt project's dynamic tables within their target lag.",
    no_args_is_help=True,
    add_completion=False,
)

PIPED_WIDTH = 160


def _console(stderr: bool = False) -> Console:
    # Piped output (logs, CI) has no width to fit, and rich's 80-column default for it folds
    # every cell of an eight-column table; a terminal or an explicit COLUMNS still decides.
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() or "COLUMNS" in os.environ else PIPED_WIDTH
    return Console(stderr=stderr, width=width)


console = _console()
errors = _console(stderr=True)

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}

ProjectDir = Annotated[Path, typer.Option("--project-dir", help="The dbt project directory.")]
ProfilesDir = Annotated[
    Optional[Path], typer.Option("--profiles-dir", help="Where profiles.yml is (dbt's default if unset).")
]
Target = Annotated[Optional[str], typer.Option("--target", "-t", help="The profile target.")]
Select = Annotated[
    Optional[List[str]],
    typer.Option("--select", "-s", help="dbt selection syntax: the dynamic tables to keep fresh."),
]
TimeScale = Annotated[
    float,
    typer.Option(
        "--time-scale",
        help="Shrink the canonical period unit (48 s) by this factor, for demos and tests.",
        min=0.0001,
        max=1.0,
    ),
]
UiHost = Annotated[
    str,
    typer.Option(
        "--ui-host",
        help="Where the page listens. Another address than the loopback one needs --ui-token.",
    ),
]
UiPort = Annotated[int, typer.Option("--ui-port", help="The page's port (0: a free one).", min=0, max=65535)]
UiToken = Annotated[
    Optional[str],
    typer.Option(
        "--ui-token",
        envvar=TOKEN_ENV,
        help="A secret every request to the page must carry (needed to listen beyond this machine).",
    ),
]


# -- helpers ---------------------------------------------------------------------------------------


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    errors.print(f"[bold red]Error:[/] {escape(message)}", highlight=False)
    raise typer.Exit(code)


def metadata_checked(command: Callable[..., None]) -> Callable[..., None]:
    """A command that ends with one message, not a traceback, when a metadata table is damaged."""

    @functools.wraps(command)
    def checked(*args: Any, **kwargs: Any) -> None:
        try:
            command(*args, **kwargs)
        except MetadataDamaged as damaged:
            fail(str(damaged), EXIT_FAILED)

    return checked


def parse_duration(text: str, option: str = "--for") -> float:
    """'90' or '90s', '2m', '1h', '500ms' → seconds."""
    match = DURATION.match(text)
    if not match:
        fail(f"{option} {text!r} is not a duration. Use e.g. 30s, 2m or 1h.")
    return float(match.group(1)) * DURATION_UNITS[match.group(2) or "s"]


def load(
    project_dir: Path,
    profiles_dir: Optional[Path],
    target: Optional[str],
    select: Optional[List[str]] = None,
    time_scale: float = 1.0,
) -> tuple[LoadedProject, DynamicTableGraph]:
    """The project and its DT graph; bad input exits with one message before anything runs."""
    options = ProjectOptions(project_dir, profiles_dir, target, tuple(select or ()))
    try:
        with console.status("Parsing and compiling the dbt project…"):
            loaded = load_project(options)
        graph = build_graph(loaded.nodes, unit_ms=max(1, round(CANONICAL_UNIT_MS * time_scale)))
    except (ProjectError, GraphError) as exc:
        fail(str(exc))
    for node in loaded.nodes:
        for warning in node.dt.config.warnings:
            errors.print(f"[yellow]Warning:[/] {escape(warning)}", highlight=False)
    if loaded.problems:
        table = titled_table("Not loaded (the other dynamic tables are)", ("model", "why"))
        for model, why in sorted(loaded.problems.items()):
            table.add_row(model, escape(why))
        errors.print(table)
    return loaded, graph


def start_service(loaded: LoadedProject) -> DynamicTableService:
    try:
        with console.status(f"Starting the {loaded.credentials.method} engine…"):
            return loaded.service()
    except ProjectError as exc:
        fail(str(exc))


def node_or_fail(loaded: LoadedProject, graph: DynamicTableGraph, model: str) -> GraphNode:
    if model in loaded.problems:
        fail(f"Model '{model}' {loaded.problems[model]}")
    try:
        return graph.by_model(model)
    except GraphError as exc:
        fail(str(exc))


def model_in_service(
    model: str, project_dir: Path, profiles_dir: Optional[Path], target: Optional[str]
) -> Tuple[DynamicTableGraph, GraphNode, DynamicTableService]:
    """The project's graph, the node of ``model`` and a started service, or one error and exit."""
    loaded, graph = load(project_dir, profiles_dir, target)
    node = node_or_fail(loaded, graph, model)
    return graph, node, start_service(loaded)


def clock_text(moment: Optional[datetime]) -> str:
    """UTC, to the second; the date only when it is not today's."""
    if moment is None:
        return "-"
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    moment = moment.astimezone(timezone.utc)
    today = datetime.now(timezone.utc).date()
    return moment.strftime("%H:%M:%S" if moment.date() == today else "%Y-%m-%d %H:%M:%S")


def seconds_text(seconds: Optional[float]) -> str:
    if seconds is None:
        return "-"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 120:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.1f} s"


def failures_text(graph: DynamicTableGraph, name: str, row: Optional[GraphRow]) -> str:
    """Consecutive failures, and when a backing-off DT is tried next."""
    if row is None or not row.consecutive_failures:
        return "0"
    period = graph.period_ms[name]
    state = DynamicTableState(consecutive_failures=row.consecutive_failures, failed_at=row.recorded_at)
    retry = state.retry_at_ms(period) if period and row.scheduling_state is SchedulingState.ACTIVE else None
    if retry is None or retry <= time.time() * 1000:
        return str(row.consecutive_failures)
    return f"{row.consecutive_failures} (next try {clock_text(from_ms(retry))})"


def verify_text(mode: Optional[str], last: Optional[HistoryRow]) -> str:
    """A DT's ``verify`` mode and how its latest verified refresh compared (docs/ARCHITECTURE.md,
    "Verifying"): ``full: equal``, ``sample: MISMATCH``, ``off``."""
    outcome = ""
    if last is not None and last.verified:
        word = last.verified.split(" (", 1)[0].split(":", 1)[0]
        color = "green" if word == "equal" else "red" if word == "MISMATCH" else "yellow"
        outcome = f": [{color}]{word}[/] at {clock_text(last.data_timestamp)}"
    return f"{mode or 'off'}{outcome}"


def period_text(graph: DynamicTableGraph, name: str) -> str:
    period = graph.period_ms[name]
    return "-" if period is None else seconds_text(period / 1000)


STATE_STYLES = {
    State.SUCCEEDED: "green",
    State.FAILED: "bold red",
    State.UPSTREAM_FAILED: "red",
    State.SKIPPED: "yellow",
    State.CANCELLED: "yellow",
    SchedulingState.SUSPENDED: "magenta",
}


def styled(state: Optional[Union[State, SchedulingState]]) -> str:
    if not state:
        return "-"
    style = STATE_STYLES.get(state)
    return f"[{style}]{state}[/]" if style else str(state)


TIMES_IN_UTC = "times in UTC"


def titled_table(title: str, columns: Sequence[str], caption: Optional[str] = None) -> Table:
    """A table of ``columns`` whose long values fold onto more lines rather than being cut."""
    table = Table(title=title, title_justify="left", show_edge=False, caption=caption, caption_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def outcome_table(title: str, outcomes: List[Outcome]) -> Table:
    table = titled_table(
        title, ("dynamic table", "state", "action", "data timestamp", "seconds", "detail"), TIMES_IN_UTC
    )
    for o in outcomes:
        table.add_row(
            o.model,
            styled(o.state),
            o.action or "-",
            clock_text(o.data_timestamp),
            f"{o.seconds:.2f}",
            escape(o.message),
        )
    return table


def schedule_table(graph: DynamicTableGraph, chosen: List[str]) -> Table:
    table = titled_table(
        "Schedule",
        (
            "dynamic table",
            "target lag",
            "period",
            "refresh mode",
            "reads (pipeline)",
            "reads across a boundary",
        ),
    )
    for name in graph.order:
        node = graph.nodes[name]
        if name not in chosen:
            continue
        table.add_row(
            node.model,
            target_lag_text(graph, name),
            period_text(graph, name),
            node.dt.config.refresh_mode,
            ", ".join(sorted(graph.model(u) for u in node.upstream)) or "-",
            ", ".join(sorted(node.boundary_inputs)) or "-",
        )
    return table


# -- refresh, suspend, resume ----------------------------------------------------------------------


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
    scheduler = Scheduler(graph, ServiceBackend(service))
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


# -- status, history, graph ------------------------------------------------------------------------


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
    table = titled_table(
        "Dynamic tables",
        (
            "dynamic table",
            "target lag",
            "period",
            "data timestamp",
            "current lag",
            "state",
            "last action",
            "verify",
            "failures",
        ),
        TIMES_IN_UTC,
    )
    for name in graph.order:
        frontier, row, last = frontiers.get(name), graph_rows.get(name), latest.get(name)
        lag: Optional[float] = None
        if frontier is not None:
            lag = (now - frontier.data_timestamp).total_seconds()
        target_seconds = graph.effective_lag[name]
        lag_cell = seconds_text(lag)
        if lag is not None and target_seconds is not None:
            lag_cell = f"[{'red' if lag > target_seconds else 'green'}]{lag_cell}[/]"
        last_cell = "-"
        if last is not None:
            last_cell = f"{last.refresh_action or '-'} {styled(last.state)}"
        table.add_row(
            graph.model(name),
            target_lag_text(graph, name),
            period_text(graph, name),
            clock_text(frontier.data_timestamp if frontier else None),
            lag_cell if frontier else "[dim]not initialized[/]",
            styled(row.scheduling_state if row else SchedulingState.ACTIVE),
            last_cell,
            verify_text(graph.nodes[name].dt.config.verify, checked.get(name)),
            failures_text(graph, name, row),
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


@app.command()
@metadata_checked
def history(
    model: Annotated[str, typer.Argument(help="The dynamic table.")],
    project_dir: ProjectDir = Path("."),
    profiles_dir: ProfilesDir = None,
    target: Target = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Most recent rows to show.")] = 20,
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


# -- consistent reads ------------------------------------------------------------------------------


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


# -- repair ----------------------------------------------------------------------------------------


@app.command()
def repair(
    project_dir: ProjectDir = Path("."),
    profiles_dir: ProfilesDir = None,
    target: Target = None,
) -> None:
    """Rebuild damaged metadata tables from what can still be read, and find the dynamic tables
    whose own files are damaged (exit 1 while one is: the command that rebuilds it is listed)."""
    loaded, graph = load(project_dir, profiles_dir, target)
    schema = loaded.metadata_schema
    store = MetadataStore(f"{loaded.warehouse}/{schema.lower()}", schema)
    with console.status(f"Checking the metadata tables of {schema}…"):
        repaired = store.repair()
    table = titled_table(
        f"Metadata tables of {schema}",
        ("table", "state", "rows kept", "kept from", "unreadable files", "damage"),
    )
    for outcome in repaired:
        sound = outcome.damage is None
        table.add_row(
            outcome.table,
            "[green]sound[/]" if sound else "[yellow]rebuilt[/]",
            "-" if sound else f"{outcome.rows:,}",
            outcome.kept_from or "-",
            "-" if sound else str(outcome.unreadable_files),
            escape(outcome.damage or "-"),
        )
    console.print(table)
    moved = [outcome.moved_to for outcome in repaired if outcome.moved_to is not None]
    if moved:
        console.print(
            "Dynamic tables whose frontier was lost or is older than their data are recomputed at "
            f"their next refresh. The damaged folders were kept in {escape(moved[0].rsplit('/', 1)[0])}: "
            "delete them when you no longer need them."
        )
    if repair_dynamic_tables(loaded, graph):
        raise typer.Exit(EXIT_FAILED)


def repair_dynamic_tables(loaded: LoadedProject, graph: DynamicTableGraph) -> int:
    """Check each dynamic table's own files (docs/ARCHITECTURE.md, "Damage") and print what is
    damaged with the command that rebuilds it; returns how many are damaged."""
    layout = Warehouse(loaded.warehouse)
    table = titled_table("Dynamic tables", ("dynamic table", "state", "damage", "fix"))
    damaged = 0
    with console.status("Checking the dynamic tables' Delta logs and files…"):
        for node in sorted(graph.nodes.values(), key=lambda n: n.model):
            folder = layout.table_location(node.dt.schema, node.dt.identifier)
            if not storage.is_delta_table(folder):
                table.add_row(node.model, "[dim]not built[/]", "-", "-")
                continue
            found = damage(folder)
            damaged += found is not None
            table.add_row(
                f"{node.model} ({node.name})",
                "[green]sound[/]" if found is None else "[red]damaged[/]",
                escape(found or "-"),
                escape(rebuild_command(node.model)) if found else "-",
            )
    console.print(table)
    return damaged


# -- explain, report -------------------------------------------------------------------------------


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


# `run` and `ui` (the scheduler, its page, its stop) are in a module of their own.
from dbt.adapters.dyntable import cli_run  # noqa: E402  (registers them on app)

# ... and `dyntable --help` lists them first: they are what a user starts with.
app.registered_commands.sort(
    key=lambda command: getattr(command.callback, "__module__", "") != cli_run.__name__
)

if __name__ == "__main__":
    app()
