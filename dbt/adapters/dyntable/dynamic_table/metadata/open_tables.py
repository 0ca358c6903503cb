"""The metadata tables a process holds open: brought up to date cheaply, read as plain Parquet, the
rows every refresh reads kept in memory, and what a damaged table raises named as such
(docs/ARCHITECTURE.md, "Metadata tables")."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, ClassVar, Dict, Iterator, List, Optional, Set, Tuple, Union

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pa_fs
from deltalake import DeltaTable
from deltalake.exceptions import CommitFailedError, DeltaError

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.delta_log import FolderStamp, commit_file, folder_stamp, folder_unchanged
from dbt.adapters.dyntable.dynamic_table.metadata.tables import (
    CACHED_TABLES,
    DAMAGE_ERRORS,
    TS,
    MetadataDamaged,
)
from dbt.adapters.dyntable.vocabulary import first_line

Rows = List[Dict[str, Any]]


class OpenTables:
    """The metadata tables under ``root`` (one folder per table) as this process holds them."""

    #: Held by every metadata write of this process, whichever store makes it: its writers take
    #: turns instead of retrying against each other's commits (other processes' commits are
    #: retried: ``TableAccess.commit``).
    write_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, root: Union[str, Path], schema: str) -> None:
        #: The metadata schema's folder: a local path, or a URL in an object store.
        self.root = str(root).rstrip("/")
        self.storage = storage.of(self.root)
        self.schema = schema
        # Opening a Delta table replays its log (tens of ms); an open one catches up by reading
        # only the commits since (update_incremental), which keeps a NO_DATA refresh cheap. An
        # open table is not safe to use from two threads at once (the runner's ticks overlap),
        # hence the lock around every use.
        self._open: Dict[str, DeltaTable] = {}
        self.lock = threading.RLock()
        # Per open table, its log folder's stamp when it was last brought up to date, and when:
        # while the folder stays unchanged, no one committed, and the update is skipped (it costs
        # about a millisecond per table, a NO_DATA refresh reads two).
        self._log_stamps: Dict[str, Tuple[FolderStamp, int]] = {}
        # Frontiers and graph rows are read by every refresh: kept in memory as of a Delta version,
        # re-read when another writer moved the table, patched with what this store writes.
        self._cached: Dict[str, Tuple[int, Rows]] = {}
        # The tables this thread's refresh checked for new commits (``one_look``).
        self._looked = threading.local()
        # The tables checked since the batch began, for the looks that share them.
        self._batch_looked: Set[str] = set()

    def location(self, table: str) -> str:
        return f"{self.root}/{table}"

    def damaged(self, table: str, detail: str) -> MetadataDamaged:
        return MetadataDamaged(f"{self.schema}.{table}", self.location(table), detail)

    @contextmanager
    def reading(self, table: str) -> Iterator[None]:
        """Turns what a damaged table raises into :class:`MetadataDamaged`."""
        try:
            yield
        except (MetadataDamaged, CommitFailedError):
            raise
        except DAMAGE_ERRORS as exc:
            unreachable = storage.unreachable(exc, self.root)
            if unreachable is not None:
                raise storage.StorageUnreachable(unreachable) from exc
            raise self.damaged(table, first_line(exc)) from exc

    @contextmanager
    def one_look(self, batch_wide: bool = False) -> Iterator[None]:
        """Inside (one refresh, in this thread), each table is checked for other writers' commits
        at its first read only; later reads see that version, or a newer one this store wrote.
        The refresh holds its DT's lock, so its own rows cannot move meanwhile, and it reads the
        other DTs' rows as of its start, as a refresh a moment earlier would have.
        ``batch_wide``: at its first read in the batch (:meth:`new_batch`), for a NO_DATA decided
        without the lease, which reads the rows as of the batch's start (docs/ARCHITECTURE.md,
        "Object storage")."""
        if getattr(self._looked, "tables", None) is not None:
            yield  # already inside one
            return
        self._looked.tables = self._batch_looked if batch_wide else set()
        try:
            yield
        finally:
            self._looked.tables = None

    def new_batch(self) -> None:
        """A batch begins: a batch-wide look checks each table once more."""
        self._batch_looked = set()

    def look_again(self, table: str) -> None:
        """Check ``table`` for other writers' commits at its next read, inside ``one_look`` too
        (a write starts from the table's latest version)."""
        looked: Optional[Set[str]] = getattr(self._looked, "tables", None)
        if looked is not None:
            looked.discard(table)

    def open_side_by_side(self, tables: List[str]) -> None:
        """Open ``tables`` at once: deltalake reads a log without holding the GIL, so a process's
        first refresh waits for the slowest table rather than for all of them in turn."""

        def open_one(table: str) -> Optional[DeltaTable]:
            try:
                return storage.delta_table(self.location(table))
            except DAMAGE_ERRORS:
                return None  # opened again by what reads it, which reports or repairs it

        unopened = [t for t in tables if t not in self._open]
        if len(unopened) < 2:
            return
        with ThreadPoolExecutor(len(unopened)) as pool:
            opened = list(pool.map(open_one, unopened))
        with self.lock:
            for table, table_opened in zip(unopened, opened):
                if table_opened is not None:
                    self._open.setdefault(table, table_opened)

    def held(self, table: str) -> Optional[DeltaTable]:
        """``table`` as opened, not brought up to date; None when it is not open."""
        return self._open.get(table)

    def table(self, table: str) -> DeltaTable:
        """``table`` at its latest version (other processes write these tables too); callers
        hold ``lock`` while they use it."""
        looked: Optional[Set[str]] = getattr(self._looked, "tables", None)
        with self.reading(table), self.lock:
            opened = self._open.get(table)
            if opened is not None and looked is not None and table in looked:
                return opened
            location = self.location(table)
            remote = self.storage.remote
            seen_at = time.time_ns()
            stamp = None if remote else folder_stamp(f"{location}/_delta_log")
            seen = self._log_stamps.get(table)
            # A log folder unchanged since the table was brought up to date holds no new commit;
            # in an object store, one listing from the version read on tells the same.
            if opened is not None and not (seen is not None and folder_unchanged(stamp, *seen)):
                try:
                    if remote:
                        rewound = self._remote_update(opened, location)
                    else:
                        opened.update_incremental()
                        # A log restored from an older backup may still "update" without error
                        # while it no longer holds the version read.
                        rewound = not os.path.exists(f"{location}/{commit_file(opened.version())}")
                except DeltaError:
                    rewound = True
                if rewound:
                    # The log no longer continues what this process read (a table re-created,
                    # or commits lost in a restore from backup): read it afresh.
                    self._cached.pop(table, None)
                    opened = None
            if opened is None:
                opened = self._open[table] = storage.delta_table(location)
            if stamp is not None:
                self._log_stamps[table] = (stamp, seen_at)
            if looked is not None:
                looked.add(table)
            return opened

    def _remote_update(self, opened: DeltaTable, location: str) -> bool:
        """Bring ``opened`` up to date from an object store with one listing of its log from the
        version it holds on (deltalake's update costs two requests); True when the log no longer
        holds that version's commit (re-created, or restored from an older backup)."""
        held = f"{opened.version():020d}"
        listed = [f.name for f in self.storage.files(f"{location}/_delta_log", after=held)]
        if f"{held}.json" not in listed:
            return True
        if any(name.endswith(".json") and name > f"{held}.json" for name in listed):
            opened.update_incremental()
        return False

    def read_rows(self, table: str, name: Optional[str], since: Optional[datetime] = None) -> Rows:
        with self.reading(table), self.lock:
            opened = self.table(table)
            if table in CACHED_TABLES:
                cached = self._cached.get(table)
                if cached is None or cached[0] != opened.version():
                    cached = self._cached[table] = (
                        opened.version(),
                        self.dataset(table).to_table().to_pylist(),
                    )
                return [dict(r) for r in cached[1] if name is None or r["name"] == name]
            dataset = self.dataset(table)
            where = ds.field("name") == name if name else None
            if since is not None:  # the history's recent rows (the runner's live page)
                recent = ds.field("refresh_start_time") >= pa.scalar(since, TS)
                where = recent if where is None else where & recent
            selected = dataset.to_table(filter=where)
        rows: Rows = selected.to_pylist()
        return rows

    def dataset(self, table: str) -> ds.Dataset:
        return files_dataset(self._open[table], self.location(table))

    def committed(self, table: str, patch: Optional[Callable[[Rows], Rows]]) -> int:
        """The version this store's commit to ``table`` made; the cached rows are turned into
        that version's by ``patch`` when the commit came right after them, else dropped."""
        with self.lock:
            cached = self._cached.pop(table, None)
            version = self.table(table).version()
            if cached is not None and patch is not None and cached[0] == version - 1:
                self._cached[table] = (version, patch(cached[1]))
        return version

    def drop_cached(self, table: str) -> None:
        self._cached.pop(table, None)

    def forget(self, table: str) -> None:
        with self.lock:
            self._open.pop(table, None)
            self._cached.pop(table, None)

    def forget_all(self) -> None:
        self._open.clear()
        self._cached.clear()


def files_dataset(table: DeltaTable, location: str) -> ds.Dataset:
    """The table's live files as an Arrow dataset. The store writes plain Parquet files (reader
    protocol 1: no column mapping, no deletion vectors), so they are read as they are: 5 ms where
    deltalake's dataset, which builds an expression per file, took 15-45 ms (docs/ARCHITECTURE.md,
    "Metadata tables"). A table someone moved to a higher reader protocol is read through
    deltalake. Arrow's own file systems either way (the local one, or the object store's as
    :mod:`...storage` configures it): deltalake's default is a Python-implemented one that Arrow's
    I/O threads call back into, and a thread doing so while the interpreter exits takes the
    process down ("terminate called without an active exception")."""
    filesystem, root = storage.arrow(location)
    if table.protocol().min_reader_version > 1:  # column mapping (2), or reader features (3)
        return table.to_pyarrow_dataset(filesystem=pa_fs.SubTreeFileSystem(root, filesystem))
    files = [storage.arrow(uri)[1] for uri in table.file_uris()]
    return ds.dataset(
        files, schema=pa.schema(table.schema().to_arrow()), format="parquet", filesystem=filesystem
    )
