"""What every `dyntable` command shares: the app, its exit codes and options, and loading the
dbt project, its graph and its engine with one message, not a traceback, for bad input."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, Callable, List, NoReturn, Optional, Tuple

import typer
from rich.markup import escape
from typing_extensions import Annotated

from dbt.adapters.dyntable.cli.output import console, errors, titled_table
from dbt.adapters.dyntable.dynamic_table.metadata import MetadataDamaged
from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService
from dbt.adapters.dyntable.runner.graph import (
    CANONICAL_UNIT_MS,
    DynamicTableGraph,
    GraphError,
    GraphNode,
    build_graph,
)
from dbt.adapters.dyntable.runner.project import LoadedProject, ProjectError, ProjectOptions, load_project
from dbt.adapters.dyntable.runner.web.auth import TOKEN_ENV

app = typer.Typer(
    name="dyntable",
    help="Keep a dbt project's dynamic tables within their target lag.",
    no_args_is_help=True,
    add_completion=False,
)

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
