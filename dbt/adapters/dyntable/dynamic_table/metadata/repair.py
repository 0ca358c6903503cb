"""Repairing a damaged metadata table: its folder moved aside and the table rebuilt from what can
still be read, by `dyntable repair` or by a store that repairs as it goes (docs/ARCHITECTURE.md,
"Metadata tables")."""

from __future__ import annotations

import fcntl
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pyarrow as pa
import pyarrow.parquet as pq

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.dynamic_table.metadata.open_tables import OpenTables, files_dataset
from dbt.adapters.dyntable.dynamic_table.metadata.rows import utcnow
from dbt.adapters.dyntable.dynamic_table.metadata.tables import (
    DAMAGE_ERRORS,
    LOG_SETTINGS,
    NO_LOG,
    SCHEMAS,
    MetadataDamaged,
)
from dbt.adapters.dyntable.vocabulary import first_line

#: Where `dyntable repair` moves a damaged table's folder (a dot folder: never attached as a table).
DAMAGED_DIR = ".damaged"
#: The lock one process at a time repairs the metadata tables under (beside the refresh locks).
REPAIR_LOCK = "metadata-repair.lock"


@dataclass(frozen=True)
class Repaired:
    """What `MetadataStore.repair` did to one table."""

    table: str
    damage: Optional[str]
    """None: the table was sound and left alone."""
    rows: int = 0
    kept_from: str = ""
    """Which rows were kept: a version of the log, or every readable data file."""
    unreadable_files: int = 0
    moved_to: Optional[str] = None


class _RepairLock:
    """An exclusive ``flock`` on :data:`REPAIR_LOCK`, waited for: a repair takes milliseconds. In
    an object store, with no file to lock, repairs are not serialized: a repair moves a table
    only after finding it damaged, and a second one finds the first's table sound."""

    def __init__(self, locks: str, remote: bool) -> None:
        self.path = None if remote else Path(locks) / REPAIR_LOCK
        self._handle: Optional[Any] = None

    def __enter__(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = open(self.path, "a")
        fcntl.flock(self._handle.fileno(), fcntl.LOCK_EX)

    def __exit__(self, *exc: Any) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()


class Repairs:
    """Rebuilds damaged tables of ``tables``; with ``enabled``, a table found damaged is repaired
    in place and the work goes on, with a warning (:meth:`take_warnings`), where without it
    :class:`MetadataDamaged` stops it: the refreshes' store repairs, the `dyntable` commands that
    only read report. ``locks``: the folder of the refresh locks, where the repair lock is too."""

    def __init__(self, tables: OpenTables, locks: str, enabled: bool) -> None:
        self.tables = tables
        self.locks = locks
        self.enabled = enabled
        self._warnings: List[str] = []

    def repair(self) -> List[Repaired]:
        """Rebuild every damaged metadata table from what can still be read, moving its folder
        aside under ``.damaged/``; sound tables are left alone.

        Rows come from the newest version of the log that loads, its data files read one by one
        (unreadable ones skipped); with no loadable version, from every readable data file in the
        folder. Either way nothing wrong is served afterwards: the latest row per DT wins, and a
        frontier lost or older than its DT's data makes the DT recompute (docs/ARCHITECTURE.md,
        "Metadata tables")."""
        with _RepairLock(self.locks, self.tables.storage.remote), self.tables.write_lock, self.tables.lock:
            self.tables.forget_all()
            return [self._rebuild(table) for table in SCHEMAS]

    def repair_damaged(self, table: str, damaged: MetadataDamaged) -> None:
        """Repair ``table`` as `dyntable repair` does, one process at a time (another may have
        repaired it while this one waited: a sound table is left alone), and say so."""
        tables = self.tables
        with _RepairLock(self.locks, tables.storage.remote), tables.write_lock, tables.lock:
            tables.forget(table)
            try:
                repaired = self._rebuild(table)
            except DAMAGE_ERRORS as exc:
                raise tables.damaged(
                    table, f"{damaged.detail}; repairing it failed: {first_line(exc)}"
                ) from exc
        if repaired.damage is not None:
            self._warnings.append(
                f"The metadata table {repaired.table} was damaged ({repaired.damage}) and was rebuilt "
                f"from {repaired.kept_from} ({repaired.rows} rows; the damaged folder is kept in "
                f"{repaired.moved_to}). A dynamic table whose frontier was lost recomputes at its next "
                "refresh. `dyntable repair` checks every metadata table and dynamic table."
            )

    def take_warnings(self) -> List[str]:
        """What this store repaired since it was last asked (each said once)."""
        with self.tables.write_lock:
            warnings, self._warnings = self._warnings, []
        return warnings

    def _rebuild(self, table: str) -> Repaired:
        tables = self.tables
        path, schema = tables.location(table), SCHEMAS[table]
        damage = _damage(path)
        if damage is None:
            return Repaired(f"{tables.schema}.{table}", None)
        rows, kept_from, unreadable = _salvage(path)
        moved = f"{tables.root}/{DAMAGED_DIR}/{table}-{utcnow():%Y%m%dT%H%M%S%f}"
        tables.storage.move_tree(path, moved)
        storage.create_delta(path, schema=schema, configuration=LOG_SETTINGS)
        if rows:
            storage.write_delta(path, pa.Table.from_pylist(rows, schema=schema), mode="append")
        return Repaired(f"{tables.schema}.{table}", damage, len(rows), kept_from, unreadable, moved)


def _damage(path: str) -> Optional[str]:
    """What is wrong with the metadata table at ``path``, or None when it reads whole."""
    if not storage.is_delta_table(path):
        return NO_LOG if any(f.name.endswith(".parquet") for f in storage.of(path).files(path)) else None
    try:
        files_dataset(storage.delta_table(path), path).to_table()
    except DAMAGE_ERRORS as exc:
        return first_line(exc)
    return None


def _salvage(path: str) -> Tuple[List[Dict[str, Any]], str, int]:
    """The rows that can still be read at ``path``, where they come from, and how many data
    files could not be read."""
    found = storage.of(path)
    log = f"{path}/_delta_log"
    commits = [f.name for f in found.files(log) if f.name.endswith(".json")]
    versions = sorted((int(name.split(".")[0]) for name in commits), reverse=True)
    for version in versions:
        try:
            uris = storage.delta_table(path, version=version).file_uris()
        except DAMAGE_ERRORS:
            continue
        rows, unreadable = _read_each(list(uris))
        return rows, f"version {version}", unreadable
    files = [f for f in found.walk(path) if f.endswith(".parquet") and not f.startswith(log + "/")]
    rows, unreadable = _read_each(files)
    # Every file ever written: a compaction's output repeats the rows of the files it replaced.
    unique = list({tuple(sorted(row.items())): row for row in rows}.values())
    return unique, "every readable data file", unreadable


def _read_each(files: List[str]) -> Tuple[List[Dict[str, Any]], int]:
    rows: List[Dict[str, Any]] = []
    unreadable = 0
    for data_file in files:
        try:
            filesystem, path = storage.arrow(data_file)
            rows.extend(pq.read_table(path, filesystem=filesystem).to_pylist())
        except DAMAGE_ERRORS:
            unreadable += 1
    return rows, unreadable
