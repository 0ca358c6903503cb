"""`dyntable run` and `dyntable ui`: the scheduler with its clean stop (SIGTERM, SIGINT), its JSON
log, and the live page."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import List, Optional, Tuple

import typer
from typing_extensions import Annotated

from dbt.adapters.dyntable.cli.base import (
    EXIT_FAILED,
    ProfilesDir,
    ProjectDir,
    Select,
    Target,
    TimeScale,
    UiHost,
    UiPort,
    UiToken,
    app,
    fail,
    load,
    metadata_checked,
    parse_duration,
    start_service,
)
from dbt.adapters.dyntable.cli.output import clock_text, console, outcome_table, schedule_table, seconds_text
from dbt.adapters.dyntable.dynamic_table.refresh.record import Recorder
from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService
from dbt.adapters.dyntable.runner import control
from dbt.adapters.dyntable.runner.graph import DynamicTableGraph
from dbt.adapters.dyntable.runner.log import LOG_FORMATS, RunLog
from dbt.adapters.dyntable.runner.project import LoadedProject, ProjectError
from dbt.adapters.dyntable.runner.scheduler import Outcome, Scheduler, TickPlan
from dbt.adapters.dyntable.runner.shutdown import GracefulStop
from dbt.adapters.dyntable.runner.web.auth import BindRefused, check_bind
from dbt.adapters.dyntable.runner.web.server import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    PageError,
    PageOptions,
    PageServer,
)


class InterruptibleClock:
    """The system clock, whose sleep ends early when the runner is asked to stop (Ctrl-C)."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop

    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        self.stop.wait(seconds)


def page_options(host: str, port: int, token: Optional[str]) -> PageOptions:
    try:
        check_bind(host, token)
    except BindRefused as exc:
        fail(str(exc))
    return PageOptions(host, port, token)


def start_page(
    options: PageOptions,
    loaded: LoadedProject,
    graph: DynamicTableGraph,
    log: RunLog,
    runner: bool,
) -> PageServer:
    """The live page, listening before the engine starts (its /readyz says when that is done)."""
    metadata = loaded.metadata()

    def page_service() -> DynamicTableService:
        if runner:  # the runner's own, handed over by attach() once started
            raise control.ActionRefused("The runner's engine is still starting.", 503)
        try:
            return loaded.service()
        except ProjectError as exc:
            raise control.ActionRefused(str(exc), 503) from None

    try:
        page = PageServer(
            options,
            graph,
            metadata,
            Recorder(metadata),
            page_service,
            title=f"dyntable · {loaded.options.project_dir.name}",
            on_tick=log.tick,
            runner=runner,
        ).start()
    except PageError as exc:
        fail(str(exc))
    log.say(f"Live page: {page.url} (metrics: {page.url}metrics)", event="page", url=page.url)
    return page


@app.command()
@metadata_checked
def run(
    project_dir: ProjectDir = Path("."),
    profiles_dir: ProfilesDir = None,
    target: Target = None,
    select: Select = None,
    once: Annotated[bool, typer.Option("--once", help="Run a single tick, then exit.")] = False,
    run_for: Annotated[
        Optional[str], typer.Option("--for", help="Stop by itself after this long (e.g. 2m).")
    ] = None,
    time_scale: TimeScale = 1.0,
    ui: Annotated[
        bool, typer.Option("--ui", help="Serve the live page, /metrics, /healthz and /readyz.")
    ] = False,
    ui_host: UiHost = DEFAULT_HOST,
    ui_port: UiPort = DEFAULT_PORT,
    ui_token: UiToken = None,
    log_format: Annotated[
        str, typer.Option("--log-format", help="text (tables) or json (one event per line, one per refresh).")
    ] = "text",
    stop_timeout: Annotated[
        str,
        typer.Option(
            "--stop-timeout",
            help="How long a stop (SIGTERM, Ctrl-C) may take: refreshes in flight get half of it to "
            "finish, then are cancelled.",
        ),
    ] = "8s",
) -> None:
    """The scheduler: refresh every due dynamic table at each tick, in dependency order."""
    if log_format not in LOG_FORMATS:
        fail(f"--log-format {log_format!r} is not one of {', '.join(LOG_FORMATS)}.")
    duration = parse_duration(run_for) if run_for else None
    bound = parse_duration(stop_timeout, "--stop-timeout")
    options = page_options(ui_host, ui_port, ui_token) if ui else None
    log = RunLog(console, log_format, outcome_table)
    loaded, graph = load(project_dir, profiles_dir, target, select, time_scale)
    scheduler_selected = loaded.selected
    chosen = graph.closure(
        [n for n in graph.scheduled if scheduler_selected is None or n in scheduler_selected]
    )
    if not chosen:
        log.say("Nothing to schedule: no dynamic table has a target lag of its own.")
        return
    page = start_page(options, loaded, graph, log, runner=True) if options is not None else None
    try:
        service = start_service(loaded)
        scheduler = Scheduler(graph, service, scheduler_selected)
        if page is not None:
            page.attach(service, scheduler)
        ticks, stopped = _schedule(scheduler, service, graph, chosen, log, page, once, duration, bound)
    finally:
        if page is not None:
            page.stop()
    log.say(f"Stopped after {ticks} tick{'s' if ticks != 1 else ''}.", event="stopped", ticks=ticks)
    if stopped is None and (log.failures or loaded.problems):
        raise typer.Exit(EXIT_FAILED)


def _schedule(
    scheduler: Scheduler,
    service: DynamicTableService,
    graph: DynamicTableGraph,
    chosen: List[str],
    log: RunLog,
    page: Optional[PageServer],
    once: bool,
    duration: Optional[float],
    bound: float,
) -> Tuple[int, Optional[str]]:
    """Run the scheduler until its end, or a signal; the ticks it ran, and the signal's name."""
    log.show(schedule_table(graph, chosen))

    def on_tick(plan: TickPlan, outcomes: List[Outcome]) -> None:
        if page is not None and page.runner_counters is not None:
            page.runner_counters.tick(plan, outcomes, time.monotonic() - plan.dispatched_at)
        log.tick(plan, outcomes)

    def on_stop() -> None:
        scheduler.stop()
        if page is not None:
            page.control.stopping.set()

    stop_at = time.time() + duration if duration is not None else None
    until = f" until {clock_text(datetime.fromtimestamp(stop_at, tz=timezone.utc))}" if stop_at else ""
    every = "one tick" if once else f"every {seconds_text((graph.tick_ms or 0) / 1000)}{until}"
    log.say(
        f"Running {every} (SIGTERM or Ctrl-C stops after the refreshes in flight).",
        event="started",
        dynamic_tables=[graph.model(n) for n in chosen],
        tick_seconds=(graph.tick_ms or 0) / 1000,
    )
    with GracefulStop(bound, on_stop, service.engine.interrupt, log.say) as stopping:
        ticks = scheduler.run(
            InterruptibleClock(stopping.event),
            stop_at=stop_at,
            once=once,
            on_tick=on_tick,
            should_stop=stopping.event.is_set,
        )
        if page is not None:
            page.control.wait_for_actions(bound)
    return ticks, stopping.signal_name


@app.command(name="ui")
@metadata_checked
def ui_command(
    project_dir: ProjectDir = Path("."),
    profiles_dir: ProfilesDir = None,
    target: Target = None,
    time_scale: TimeScale = 1.0,
    ui_host: UiHost = DEFAULT_HOST,
    ui_port: UiPort = DEFAULT_PORT,
    ui_token: UiToken = None,
) -> None:
    """Serve the live page beside a running runner (`dyntable run`): the graph, lags, history and
    the actions, from the metadata tables; an engine starts at the first refresh or explain."""
    options = page_options(ui_host, ui_port, ui_token)
    log = RunLog(console, "text", outcome_table)
    loaded, graph = load(project_dir, profiles_dir, target, time_scale=time_scale)
    page = start_page(options, loaded, graph, log, runner=False)

    def cancel() -> None:
        if page.control.service is not None:  # a refresh asked of the page may be running
            page.control.service.engine.interrupt()

    bound = 8.0  # as `dyntable run`'s default --stop-timeout
    stopping = "Refreshes asked of the page get {half} s to finish, then are cancelled"
    with GracefulStop(bound, page.control.stopping.set, cancel, log.say, stopping) as stop:
        stop.event.wait()
        page.control.wait_for_actions(bound)
    page.stop()
