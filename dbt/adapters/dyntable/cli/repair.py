"""`dyntable repair`: the metadata tables rebuilt from what can still be read, and the dynamic
tables whose own files are damaged, with the command that rebuilds each."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.cli.base import EXIT_FAILED, ProfilesDir, ProjectDir, Target, app, load
from dbt.adapters.dyntable.cli.output import console, titled_table
from dbt.adapters.dyntable.dynamic_table.metadata import MetadataStore
from dbt.adapters.dyntable.dynamic_table.refresh.damaged import rebuild_command
from dbt.adapters.dyntable.engines.warehouse import Warehouse
from dbt.adapters.dyntable.runner.graph import DynamicTableGraph
from dbt.adapters.dyntable.runner.project import LoadedProject
from dbt.adapters.dyntable.table_damage import damage


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
