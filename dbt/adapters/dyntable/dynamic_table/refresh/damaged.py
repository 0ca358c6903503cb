"""Damaged Delta tables around a refresh (docs/ARCHITECTURE.md, "Damage"): what a failed refresh
says when the DT or a table it reads is damaged, and how `--full-refresh` sets a damaged DT aside
to build it anew.

A DT's rows are its query's: a rebuild loses nothing its sources still hold (as any
`--full-refresh` does, it recomputes the immutable rows too). Its damaged folder is moved, not
deleted, under ``.damaged/`` beside it, a dot folder neither engine attaches as a table.
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timezone
from typing import List, Optional, Set

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.differentiation.views import base_tables
from dbt.adapters.dyntable.dynamic_table.metadata import MetadataDamaged, MetadataStore
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable, RefreshError
from dbt.adapters.dyntable.dynamic_table.pinning import read_views
from dbt.adapters.dyntable.engines.base import Engine
from dbt.adapters.dyntable.table_damage import damage
from dbt.adapters.dyntable.vocabulary import first_line

#: Where a damaged DT's folder goes, beside the DT (as the metadata tables' ``.damaged``).
DAMAGED_DIR = ".damaged"


def rebuild_command(identifier: str) -> str:
    return f"dbt run --full-refresh --select {identifier}"


class TableDamaged(RefreshError):
    """A refresh failed on a damaged Delta table: which, what is damaged, the fix, the error."""


def diagnosed(
    engine: Engine, metadata: MetadataStore, dt: DynamicTable, error: Exception
) -> Optional[TableDamaged]:
    """Why ``dt``'s refresh failed with ``error`` when the DT or a table its query reads is
    damaged; None when none is, and the error stands as it is."""
    if isinstance(error, (TableDamaged, MetadataDamaged)):
        return None
    sources: List[str] = []
    upstream: Set[str] = set()
    with contextlib.suppress(Exception):  # the diagnosis must not hide the error
        sources = sorted(base_tables(dt.sql, read_views(engine, dt.sql, dt.schema), dt.schema))
    with contextlib.suppress(Exception):
        upstream = set(metadata.frontiers())
    for name in [dt.name, *sources]:
        schema, table = name.split(".", 1)
        location, found = None, None
        with contextlib.suppress(Exception):  # a table that cannot be looked up is not diagnosed
            location = engine.table_location(schema, table)
            found = damage(location) if location else None
        if found is None:
            continue
        if name == dt.name:
            fix = f"Rebuild it with `{rebuild_command(dt.model or table)}`"
            whose = "its table"
        elif name in upstream:
            fix = f"Rebuild that dynamic table with `{rebuild_command(table)}`, then refresh this one"
            whose = f"dynamic table {name}, which it reads,"
        else:
            fix = "Restore it from a backup, or build it again (dbt seed; dbt run --full-refresh of a model)"
            whose = f"source {name}"
        return TableDamaged(
            f"{whose} is damaged: {found} ({location}). {fix}; `dyntable repair` lists every damaged "
            f"table. The error was: {first_line(error)}"
        )
    return None


def set_aside(engine: Engine, dt: DynamicTable, location: str) -> str:
    """Move the damaged DT's folder under ``.damaged/`` beside it and drop it from the catalog,
    so that its rebuild creates it anew; returns where it went."""
    folder = location.removeprefix("file:").rstrip("/")
    parent, name = folder.rsplit("/", 1)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
    moved = f"{parent}/{DAMAGED_DIR}/{name}-{stamp}"
    storage.of(folder).move_tree(folder, moved)  # an object store copies each file
    try:
        engine.execute(f"DROP TABLE IF EXISTS {dt.relation}")
    except Exception as exc:  # noqa: BLE001 - the folder is gone; say what the catalog said
        raise RefreshError(
            f"its damaged table was moved to {moved}, but dropping it from the catalog failed: "
            f"{first_line(exc)}. Drop it (DROP TABLE {dt.relation}), then run the same command again."
        ) from exc
    return moved
