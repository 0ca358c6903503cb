"""The metadata Delta tables: frontiers, refresh history and graph history.

They are written with the `deltalake` package straight to their locations, not through the engine:
a NO_DATA refresh then reads its frontier and appends its history row in milliseconds, with no
engine job. They are also registered in the engine's catalog so users query them with SQL:

    select * from dyntable_meta.dynamic_table_refresh_history where name = 'shop.orders_dt'

``dynamic_table_frontiers`` has one row per dynamic table; its ``pending`` column holds a refresh's
intent while it runs (docs/ARCHITECTURE.md, "Exactly once"): set before the MERGE, cleared with the
new frontier after it (inside a batch, at the batch's end).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timedelta, timezone
from enum import Enum
from pathlib import Path
from typing import (
    Any,
    Callable,
    ClassVar,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Set,
    Tuple,
    Type,
    TypeVar,
    Union,
)

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pa_fs
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError
from deltalake.schema import Field as DeltaField

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.delta_log import (
    CHECKPOINT_INTERVAL,
    DEFAULT_CHECKPOINT_INTERVAL,
    FolderStamp,
    commit_file,
    folder_stamp,
    folder_unchanged,
)
from dbt.adapters.dyntable.dynamic_table.lifecycle import Action, SchedulingState, SourceRead, State, Trigger
from dbt.adapters.dyntable.dynamic_table.locking import LOCKS_DIR, WriterMark, writer_alive
from dbt.adapters.dyntable.vocabulary import first_line

FRONTIERS = "dynamic_table_frontiers"
REFRESH_HISTORY = "dynamic_table_refresh_history"
GRAPH_HISTORY = "dynamic_table_graph_history"
#: The small tables every refresh reads, kept in memory per Delta version.
CACHED_TABLES = (FRONTIERS, GRAPH_HISTORY)

TS = pa.timestamp("us", tz="UTC")

SCHEMAS: Dict[str, pa.Schema] = {
    FRONTIERS: pa.schema(
        [
            ("name", pa.string()),
            ("data_timestamp", TS),
            ("source_versions", pa.string()),
            ("sources", pa.string()),
            ("dt_version", pa.int64()),
            ("dt_commit", pa.string()),
            ("definition_hash", pa.string()),
            ("refresh_mode", pa.string()),
            ("definition", pa.string()),
            ("pending", pa.string()),
            ("updated_at", TS),
            ("views", pa.string()),
        ]
    ),
    REFRESH_HISTORY: pa.schema(
        [
            ("name", pa.string()),
            ("refresh_id", pa.string()),
            ("data_timestamp", TS),
            ("state", pa.string()),
            ("state_message", pa.string()),
            ("refresh_action", pa.string()),
            ("refresh_trigger", pa.string()),
            ("reason", pa.string()),
            ("refresh_start_time", TS),
            ("refresh_end_time", TS),
            ("rows_inserted", pa.int64()),
            ("rows_deleted", pa.int64()),
            ("source_versions", pa.string()),
            ("dt_version", pa.int64()),
            ("dt_commit", pa.string()),
            ("immutable_rows_ignored", pa.int64()),
            ("verified", pa.string()),
            ("source_rows_read", pa.int64()),
            ("source_files_read", pa.int64()),
        ]
    ),
    GRAPH_HISTORY: pa.schema(
        [
            ("name", pa.string()),
            ("recorded_at", TS),
            ("inputs", pa.string()),
            ("target_lag", pa.string()),
            ("effective_target_lag_seconds", pa.int64()),
            ("scheduling_state", pa.string()),
            ("consecutive_failures", pa.int64()),
            ("definition_hash", pa.string()),
            ("refresh_mode", pa.string()),
            ("accept_change", pa.bool_()),
        ]
    ),
}

COMMIT_RETRIES = 20
#: Reads and writes that meet a log another process is checkpointing and cleaning up (these
#: tables keep no log history: a reader may list commits a moment before they are removed) are
#: tried this many times more, the table read afresh each time, before it is called damaged.
TRANSIENT_RETRIES = 3
#: Every metadata commit adds a small file and every read lists them all: compact a table's files
#: into one every this many commits, so a read stays one file wide however long the runner runs.
COMPACT_EVERY = 25
#: The metadata tables keep no log history of their own (their rows are the history): each 10th
#: commit (Delta's default interval) writes a checkpoint and removes the commits before it. Opening
#: a table, or checking an open one for new commits, replays the commits since its last checkpoint:
#: 2.8 ms with 44 of them against 0.5 ms right after one (docs/ARCHITECTURE.md, "Metadata tables").
#: A reader whose next commit was removed reads the table afresh (``_table``).
LOG_SETTINGS = {
    CHECKPOINT_INTERVAL: str(DEFAULT_CHECKPOINT_INTERVAL),
    "delta.logRetentionDuration": "interval 0 seconds",
}
#: Compaction's vacuum deletes the data files removed this long ago: every reader reads the latest
#: version, and one that loaded a version whose files went since reads afresh (``_rows``). Without
#: it, each commit's small file stayed on disk: 1,400 files after 1,000 refreshes.
VACUUM_RETENTION_HOURS = 1
#: Where `dyntable repair` moves a damaged table's folder (a dot folder: never attached as a table).
DAMAGED_DIR = ".damaged"
NO_LOG = "it holds data files but no Delta log (_delta_log)"


class MetadataDamaged(RuntimeError):
    """A metadata table that cannot be read or written, named with the way out."""

    def __init__(self, table: str, location: str, detail: str) -> None:
        self.table = table
        self.detail = detail
        super().__init__(
            f"The metadata table {table} ({location}) is damaged: {detail}. Run `dyntable repair` "
            "to rebuild it from what can still be read (a dynamic table whose frontier is lost or "
            "older than its data is recomputed at its next refresh), or restore the folder from a "
            "backup."
        )


#: What reading or writing a damaged Delta table raises: a bad log (DeltaError), a bad or missing
#: data file (Arrow), a file gone from under the reader (OSError).
DAMAGE_ERRORS = (DeltaError, pa.ArrowException, OSError)
#: The columns that tell one row of each table from the others (a write that failed after its
#: commit landed is found by them).
ROW_KEYS = {
    FRONTIERS: ("name", "updated_at"),
    REFRESH_HISTORY: ("name", "refresh_id", "refresh_trigger", "state"),
    GRAPH_HISTORY: ("name", "recorded_at"),
}


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


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class _Row:
    """A dataclass stored as one row of a metadata table: JSON-encoded columns (``_JSON``) and
    enum columns (``_ENUMS``) converted both ways, so callers only see typed values."""

    _JSON: ClassVar[Tuple[str, ...]] = ()
    _ENUMS: ClassVar[Mapping[str, Type[Enum]]] = {}

    def to_record(self) -> Dict[str, Any]:
        record: Dict[str, Any] = {}
        for item in fields(self):  # type: ignore[arg-type]
            value = getattr(self, item.name)
            if item.name in self._JSON:
                value = json.dumps(value, sort_keys=True)
            elif isinstance(value, Enum):
                value = value.value
            record[item.name] = value
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Any:
        values: Dict[str, Any] = {}
        for item in fields(cls):  # type: ignore[arg-type]
            if item.name not in record:
                continue
            value = record[item.name]
            if item.name in cls._JSON:
                value = json.loads(value) if value else None
            elif item.name in cls._ENUMS and value is not None:
                value = cls._ENUMS[item.name](value)
            values[item.name] = value
        return cls(**values)


@dataclass(frozen=True)
class SourceVersion:
    """The version of a source a refresh consumed, and what makes it that version: the identity of
    its commit (``""`` when unknown: recorded before identities were kept), and how it was read."""

    version: int
    commit: str
    read: SourceRead = SourceRead.AS_OF

    def to_json(self) -> Dict[str, Any]:
        return {"version": self.version, "commit": self.commit, "read": self.read.value}

    @classmethod
    def from_json(cls, body: Any) -> "SourceVersion":
        if isinstance(body, int):  # a frontier written before identities were kept
            return cls(body, "")
        return cls(int(body["version"]), str(body["commit"]), SourceRead(body["read"]))


Sources = Dict[str, SourceVersion]


def sources_json(sources: Mapping[str, SourceVersion]) -> str:
    return json.dumps({name: source.to_json() for name, source in sources.items()}, sort_keys=True)


def sources_from_json(text: Optional[str]) -> Sources:
    return {name: SourceVersion.from_json(body) for name, body in json.loads(text or "{}").items()}


def versions_of(sources: Mapping[str, SourceVersion]) -> Dict[str, int]:
    return {name: source.version for name, source in sources.items()}


@dataclass(frozen=True)
class Intent:
    """A refresh about to commit: what the frontier becomes if the DT's commit after
    ``base_version`` exists."""

    refresh_id: str
    data_timestamp: datetime
    sources: Sources
    base_version: int
    definition_hash: str
    refresh_mode: str
    definition: str
    action: Action
    #: The views the query reads: name → fingerprint of its definition (None: not recorded).
    views: Optional[Dict[str, str]] = None
    #: The :class:`WriterMark` of the process whose batch writes the frontier this intent reaches
    #: (None: written at once).
    writer: Optional[str] = None

    def to_json(self) -> str:
        body: Dict[str, Any] = dict(self.__dict__)
        if self.writer is None:
            del body["writer"]  # as intents were written before there were marks
        body["data_timestamp"] = self.data_timestamp.isoformat()
        body["action"] = self.action.value
        body["sources"] = json.loads(sources_json(self.sources))
        return json.dumps(body, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Intent":
        body = json.loads(text)
        body["data_timestamp"] = datetime.fromisoformat(body["data_timestamp"])
        body["action"] = Action(body["action"])
        # Intents written before identities were kept name versions only.
        named = body.pop("sources", None) or body.pop("source_versions", {})
        body["sources"] = {name: SourceVersion.from_json(value) for name, value in named.items()}
        return cls(**body)


@dataclass(frozen=True)
class Frontier(_Row):
    """How far a dynamic table has consumed its sources, and the DT version (and commit) that
    produced; while a refresh runs, its ``pending`` intent (docs/ARCHITECTURE.md, "Exactly once")."""

    name: str
    data_timestamp: datetime
    sources: Sources
    dt_version: int
    definition_hash: str
    refresh_mode: str
    definition: str
    pending: Optional[Intent] = None
    dt_commit: Optional[str] = None
    updated_at: Optional[datetime] = field(default=None, compare=False)
    #: The views the query read: name → fingerprint of its definition (None: recorded before
    #: views were, by an older version).
    views: Optional[Dict[str, str]] = None

    @property
    def source_versions(self) -> Dict[str, int]:
        return versions_of(self.sources)

    def to_record(self) -> Dict[str, Any]:
        record = super().to_record()
        record["sources"] = sources_json(self.sources)
        record["source_versions"] = json.dumps(self.source_versions, sort_keys=True)
        record["pending"] = self.pending.to_json() if self.pending else None
        record["views"] = json.dumps(self.views, sort_keys=True) if self.views is not None else None
        record["updated_at"] = self.updated_at or utcnow()
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> "Frontier":
        pending, sources = record.get("pending"), record.get("sources") or record.get("source_versions")
        frontier: Frontier = super().from_record({**record, "pending": None, "sources": None})
        return replace(
            frontier,
            sources=sources_from_json(sources),
            definition=frontier.definition or "",
            pending=Intent.from_json(pending) if pending else None,
            views=json.loads(record["views"]) if record.get("views") else None,
        )

    def committing(self, intent: Intent, dt_version: int, dt_commit: Optional[str]) -> "Frontier":
        """The frontier once ``intent`` committed as DT version ``dt_version``."""
        return Frontier(
            name=self.name,
            data_timestamp=intent.data_timestamp,
            sources=intent.sources,
            dt_version=dt_version,
            definition_hash=intent.definition_hash,
            refresh_mode=intent.refresh_mode,
            definition=intent.definition,
            dt_commit=dt_commit,
            views=intent.views,
        )


@dataclass(frozen=True)
class HistoryRow(_Row):
    """One refresh attempt (``dynamic_table_refresh_history``)."""

    _JSON: ClassVar[Tuple[str, ...]] = ("source_versions",)
    _ENUMS: ClassVar[Mapping[str, Type[Enum]]] = {
        "state": State,
        "refresh_action": Action,
        "refresh_trigger": Trigger,
    }

    name: str
    refresh_id: str
    data_timestamp: Optional[datetime]
    state: State
    refresh_action: Optional[Action]
    refresh_trigger: Trigger
    refresh_start_time: datetime
    refresh_end_time: datetime
    reason: Optional[str] = None
    state_message: Optional[str] = None
    rows_inserted: int = 0
    rows_deleted: int = 0
    source_versions: Dict[str, int] = field(default_factory=dict)
    dt_version: Optional[int] = None
    #: The identity of the DT's commit at ``dt_version`` (docs/ARCHITECTURE.md, "Consistent reads").
    dt_commit: Optional[str] = None
    #: Row changes left out for being in the immutable region (docs/ARCHITECTURE.md, "Immutable rows").
    immutable_rows_ignored: int = 0
    #: How the refreshed DT compared with its query: ``equal (...)``, ``MISMATCH (...): ...``,
    #: ``not verified: ...``; None when not checked (docs/ARCHITECTURE.md, "Verifying").
    verified: Optional[str] = None
    #: Rows and data files of its sources the refresh read, by the Delta logs' statistics; None
    #: in rows written before they were recorded (docs/ARCHITECTURE.md, "Rewritten inputs").
    source_rows_read: Optional[int] = None
    source_files_read: Optional[int] = None


@dataclass(frozen=True)
class GraphRow(_Row):
    """A change of a DT's inputs, lag, definition or scheduling state
    (``dynamic_table_graph_history``)."""

    _JSON: ClassVar[Tuple[str, ...]] = ("inputs",)
    _ENUMS: ClassVar[Mapping[str, Type[Enum]]] = {"scheduling_state": SchedulingState}

    name: str
    inputs: List[str]
    target_lag: str
    effective_target_lag_seconds: Optional[int]
    scheduling_state: SchedulingState
    consecutive_failures: int
    definition_hash: str
    refresh_mode: str
    recorded_at: datetime = field(default_factory=utcnow)
    #: `dyntable resume --accept-change`: the next refresh may exceed the change fuse.
    accept_change: Optional[bool] = False


_Done = TypeVar("_Done")

#: The lock one process at a time repairs the metadata tables under (beside the refresh locks).
REPAIR_LOCK = "metadata-repair.lock"


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


def _has_log_settings(table: DeltaTable) -> bool:
    configuration = table.metadata().configuration
    return all(configuration.get(k) == v for k, v in LOG_SETTINGS.items())


class MetadataStore:
    """Reads and writes the three metadata tables under ``root`` (one folder per table)."""

    _write_lock = threading.Lock()

    def __init__(
        self,
        root: Union[str, Path],
        schema: str,
        history_retention_days: Optional[int] = None,
        repairs: bool = False,
    ) -> None:
        """``repairs``: a table found damaged is repaired in place and the work goes on, with a
        warning (:meth:`take_warnings`), where without it :class:`MetadataDamaged` stops it: the
        refreshes' store repairs, the `dyntable` commands that only read report."""
        #: The metadata schema's folder: a local path, or a URL in an object store.
        self.root = str(root).rstrip("/")
        self.storage = storage.of(self.root)
        self.schema = schema
        self.repairs = repairs
        self._warnings: List[str] = []
        #: Refresh history older than this many days is dropped when the table is compacted.
        self.history_retention_days = history_retention_days
        # Opening a Delta table replays its log (tens of ms); an open one catches up by reading
        # only the commits since (update_incremental), which keeps a NO_DATA refresh cheap. An
        # open table is not safe to use from two threads at once (the runner's ticks overlap),
        # hence the lock around every use.
        self._open: Dict[str, DeltaTable] = {}
        self._open_lock = threading.RLock()
        # Per open table, its log folder's stamp when it was last brought up to date, and when:
        # while the folder stays unchanged, no one committed, and the update is skipped (it costs
        # about a millisecond per table, a NO_DATA refresh reads two).
        self._log_stamps: Dict[str, Tuple[FolderStamp, int]] = {}
        # Frontiers and graph rows are read by every refresh: kept in memory as of a Delta version,
        # re-read when another writer moved the table, patched with what this store writes.
        self._cached: Dict[str, Tuple[int, List[Dict[str, Any]]]] = {}
        # The tables this thread's refresh checked for new commits (``one_look``).
        self._looked = threading.local()
        # Inside a batch (a runner tick, a dbt invocation), history rows and the frontiers
        # refreshes reached wait in memory and are written once, at its end.
        self._batch_lock = threading.Lock()
        self._batch_depth = 0
        self._pending_history: List[Dict[str, Any]] = []
        #: Rows a batch's end took from ``_pending_history`` and is writing: still read from here.
        self._flushing_history: List[Dict[str, Any]] = []
        self._pending_frontiers: Dict[str, Frontier] = {}
        # Held while frontiers are pending, so that another process can tell them from a crash.
        self._mark = WriterMark(self.locks)
        # Tables ``prefetch`` found with every column and log setting ``ensure`` would give them:
        # it need not look at them again.
        self._current: Set[str] = set()
        # Tables whose compaction fell due inside a batch: compacted at its end, not on the
        # refresh that happened to make the commit (see ``_compact_soon``).
        self._due_compactions: Set[str] = set()

    def location(self, table: str) -> str:
        return f"{self.root}/{table}"

    @property
    def locks(self) -> str:
        """Where the refresh locks and writer marks are kept."""
        return f"{self.root}/{LOCKS_DIR}"

    def ensure(self, register: Optional[Any] = None) -> None:
        """Create missing tables and add the columns newer versions of the plugin record;
        ``register(schema, table, location)`` adds the tables it creates to a catalog (those it
        finds were registered by the process that created them, and the embedded engine
        re-attaches every table at start)."""
        # A table ``prefetch`` found current a moment ago stays so: columns are only added.
        current = self._current
        existing = self._existing()
        self._open_side_by_side([t for t in existing if t not in current])
        with self.one_look():  # opened a moment ago, or by ``prefetch``: one check each
            for table in existing:
                if table not in current:
                    self._or_repaired(table, functools.partial(self._bring_up_to_date, table))
        for table, schema in SCHEMAS.items():
            path = self.location(table)
            if table in existing:
                continue
            if any(f.name.endswith(".parquet") for f in self.storage.files(path)):
                if not self.repairs:
                    raise self._damaged(table, NO_LOG)
                self._repair_damaged(table, self._damaged(table, NO_LOG))
            self.storage.make_folder(path)
            try:
                storage.create_delta(path, schema=schema, mode="ignore", configuration=LOG_SETTINGS)
            except DeltaError:
                pass  # another process created it first
            if register is not None:
                register(self.schema, table, path)

    def prefetch(self) -> None:
        """Open the tables that exist and read the rows every refresh reads (frontiers, graph),
        so that a process's first refresh finds them in memory: the connection manager runs this
        on a thread of its own while the engine starts (docs/ARCHITECTURE.md, "Metadata tables").
        Read-only: a missing table is left for ``ensure`` to create, a damaged one for the first
        refresh to report."""
        existing = self._existing()
        self._open_side_by_side(existing)
        for table in CACHED_TABLES:
            if table in existing:
                self._rows(table, None)
        with self._open_lock:
            for table in existing:
                opened = self._open.get(table)
                if opened is not None and self._is_current(opened, SCHEMAS[table]):
                    self._current.add(table)

    def _existing(self) -> List[str]:
        """The tables that exist; one ``prefetch`` found current is not looked for again."""
        return [t for t in SCHEMAS if t in self._current or storage.is_delta_table(self.location(t))]

    def _open_side_by_side(self, tables: List[str]) -> None:
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
        with self._open_lock:
            for table, table_opened in zip(unopened, opened):
                if table_opened is not None:
                    self._open.setdefault(table, table_opened)

    @staticmethod
    def _is_current(table: DeltaTable, schema: pa.Schema) -> bool:
        """Whether ``table`` has every column of ``schema`` and the ``LOG_SETTINGS``."""
        known = {f.name for f in table.schema().fields}
        return all(f.name in known for f in schema) and _has_log_settings(table)

    def _bring_up_to_date(self, table: str) -> None:
        """Give ``table`` what this version of the plugin records: columns, log settings."""
        self._add_missing_columns(table, SCHEMAS[table])
        self._set_log_settings(table)

    def _add_missing_columns(self, table: str, schema: pa.Schema) -> None:
        with self._open_lock:
            existing = self._table(table)  # opened once: later reads catch up from here
            known = {f.name for f in existing.schema().fields}
        missing = [f for f in schema if f.name not in known]
        if missing:
            try:
                with self._open_lock:
                    existing.alter.add_columns([DeltaField.from_arrow(f) for f in missing])
            except (CommitFailedError, DeltaError):
                pass  # another process added them first
            self._cached.pop(table, None)

    def _set_log_settings(self, table: str) -> None:
        """Give a table made by an older version of the plugin the ``LOG_SETTINGS``: one commit."""
        with self._open_lock:
            existing = self._table(table)
            if _has_log_settings(existing):
                return
            try:
                existing.alter.set_table_properties(LOG_SETTINGS)
            except (CommitFailedError, DeltaError):
                pass  # another process set them first

    @contextmanager
    def one_look(self) -> Iterator[None]:
        """Inside (one refresh, in this thread), each table is checked for other writers' commits
        at its first read only; later reads see that version, or a newer one this store wrote.
        The refresh holds its DT's lock, so its own rows cannot move meanwhile, and it reads the
        other DTs' rows as of its start, as a refresh a moment earlier would have."""
        if getattr(self._looked, "tables", None) is not None:
            yield  # already inside one
            return
        self._looked.tables = set()
        try:
            yield
        finally:
            self._looked.tables = None

    # -- frontiers -------------------------------------------------------------------------------

    def frontier(self, name: str) -> Optional[Frontier]:
        return self.frontiers(name).get(name)

    def frontiers(self, name: Optional[str] = None) -> Dict[str, Frontier]:
        """Every DT's frontier (or ``name``'s), from one read of the table (a runner tick asks
        for all)."""
        latest: Dict[str, Dict[str, Any]] = {}
        for row in sorted(self._rows(FRONTIERS, name), key=lambda r: r["updated_at"]):
            latest[row["name"]] = row
        frontiers = {key: Frontier.from_record(row) for key, row in latest.items()}
        with self._batch_lock:
            for key, reached in self._pending_frontiers.items():
                if name is not None and key != name:
                    continue
                read = frontiers.get(key)
                written = read.updated_at if read is not None else None
                if written is None or (reached.updated_at is not None and reached.updated_at > written):
                    frontiers[key] = reached  # not written yet, and newer than what the table says
        return frontiers

    def advance(self, current: Frontier, intent: Intent) -> Frontier:
        """The frontier of a NO_DATA refresh: ``current`` moved to the intent's data timestamp,
        the DT untouched (written as :meth:`_reached` says)."""
        return self._reached(current.committing(intent, current.dt_version, current.dt_commit))

    def _reached(self, frontier: Frontier) -> Frontier:
        """Record the frontier a refresh reached, stamped now (the refresh holds the DT's lock).
        Inside a batch it is written at the batch's end: a later refresh's frontier, written by
        any process, is newer and wins. A crash before the end costs a NO_DATA refresh one more
        NO_DATA refresh; a refresh that committed the DT left its intent, in the DT's commit or
        in the frontier's ``pending``, which the next refresh resolves (docs/ARCHITECTURE.md,
        "Exactly once")."""
        stamped = replace(frontier, updated_at=utcnow())
        with self._batch_lock:
            if self._batch_depth:
                self._pending_frontiers[frontier.name] = stamped
                return stamped
        self._upsert_frontier(stamped)
        return stamped

    def record_intent(self, name: str, current: Optional[Frontier], intent: Intent) -> None:
        base = current or Frontier(name, intent.data_timestamp, {}, -1, "", "", "")
        self._upsert_frontier(replace(base, pending=intent, updated_at=None))

    def commit_intent(self, name: str, intent: Intent, dt_version: int, dt_commit: Optional[str]) -> Frontier:
        """The frontier ``intent`` reached with the DT at ``dt_version`` (written as
        :meth:`_reached` says)."""
        empty = Frontier(name, intent.data_timestamp, {}, -1, "", "", "")
        return self._reached(empty.committing(intent, dt_version, dt_commit))

    def discard_intent(self, current: Frontier) -> None:
        self._upsert_frontier(replace(current, pending=None, updated_at=None))

    def forget(self, name: str) -> None:
        """Drop a DT's frontier (its table was dropped or is rebuilt from scratch)."""
        with self._batch_lock:
            self._pending_frontiers.pop(name, None)
        self._commit(
            FRONTIERS,
            lambda: self._table(FRONTIERS).delete(_eq("name", name)),
            patch=lambda rows: [r for r in rows if r["name"] != name],
        )

    def _upsert_frontier(self, frontier: Frontier) -> None:
        """Record ``frontier`` as the DT's, stamped now unless it carries its stamp (an advance).

        An append: a DT's frontier is its latest row (``updated_at``), and compaction drops the
        rows it superseded. Appending reads nothing, where a replaceWhere finds and rewrites the
        file holding the old row."""
        stamped = replace(frontier, updated_at=frontier.updated_at or utcnow())
        self._append(FRONTIERS, [stamped.to_record()])

    # -- histories -------------------------------------------------------------------------------

    def append_history(self, row: HistoryRow) -> None:
        record = row.to_record()
        with self._batch_lock:
            if self._batch_depth:
                self._pending_history.append(record)
                return
        self._append(REFRESH_HISTORY, [record])

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Write the history rows and the frontiers reached inside in two commits, at the batch's
        end; then run the compactions that fell due.

        A runner tick or a `dbt run` refreshes many DTs; a commit per row was most of what a
        NO_DATA refresh cost, and a tenth of an incremental one. A refresh's intent is its
        exactly-once protocol and is written at once, unless the DT's commit carries it: a crash
        before the batch's end leaves the intent for the next refresh to resolve
        (docs/ARCHITECTURE.md, "Exactly once"). Batches may overlap (the runner's ticks run in
        threads of their own): one that ends writes what the others recorded so far too, so
        nothing waits for a moment when no batch is open; a runner whose ticks keep overlapping
        may have none.
        """
        self.open_batch()
        try:
            yield
        finally:
            self.close_batch()

    def open_batch(self) -> None:
        with self._batch_lock:
            self._batch_depth += 1

    def close_batch(self) -> None:
        with self._batch_lock:
            self._batch_depth -= 1
            history, self._pending_history = self._pending_history, []
            self._flushing_history.extend(history)
            # Read from memory until written: a refresh in an overlapping batch that read the
            # previous frontier would take its DT's last refresh for a crashed one, and a
            # consistent read (snapshot.py) would miss the versions its DTs hold.
            reached = dict(self._pending_frontiers)
        if history:
            self._append(REFRESH_HISTORY, history)
        if reached:
            self._append(FRONTIERS, [frontier.to_record() for frontier in reached.values()])
        with self._batch_lock:
            written = {id(record) for record in history}
            self._flushing_history = [r for r in self._flushing_history if id(r) not in written]
            for name, frontier in reached.items():
                if self._pending_frontiers.get(name) is frontier:
                    del self._pending_frontiers[name]
            due, self._due_compactions = self._due_compactions, set()
            if not self._batch_depth and not self._pending_frontiers:
                self._mark.release()  # what it stood for is written
        for table in sorted(due):
            self._compact(table)

    def writer(self) -> Optional[str]:
        """The mark an intent records for the frontier it reaches to be written at the end of
        this batch (docs/ARCHITECTURE.md, "Exactly once"); None outside a batch: at once."""
        with self._batch_lock:
            return self._mark.hold() if self._batch_depth else None

    def writer_alive(self, mark: str) -> bool:
        """Whether the process that recorded ``mark`` in an intent still has its batch open, so
        that it will write the frontier the intent reaches; not this store's own mark."""
        with self._batch_lock:
            if mark == self._mark.held:
                return False
        return writer_alive(self.locks, mark)

    def history(self, name: Optional[str] = None, since: Optional[datetime] = None) -> List[HistoryRow]:
        """Every refresh recorded (or ``name``'s; those started at or after ``since``), the
        batch's rows not yet written included."""
        with self._batch_lock:
            pending = [
                r
                for r in self._flushing_history + self._pending_history
                if (name is None or r["name"] == name) and (since is None or r["refresh_start_time"] >= since)
            ]
        rows = self._rows(REFRESH_HISTORY, name, since)
        # A row written since it was taken from memory is read once (a refresh's rows differ by
        # trigger: RECOVERY for one its process did not record).
        read = {(r["refresh_id"], r["refresh_trigger"]) for r in rows}
        unwritten = [r for r in pending if (r["refresh_id"], r["refresh_trigger"]) not in read]
        return [
            HistoryRow.from_record(row)
            for row in sorted(rows + unwritten, key=lambda r: r["refresh_start_time"])
        ]

    def append_graph(self, row: GraphRow) -> None:
        self._append(GRAPH_HISTORY, [replace(row, inputs=sorted(row.inputs)).to_record()])

    def graph(self, name: Optional[str] = None) -> Dict[str, GraphRow]:
        """The latest graph row per DT."""
        latest: Dict[str, Dict[str, Any]] = {}
        for row in sorted(self._rows(GRAPH_HISTORY, name), key=lambda r: r["recorded_at"]):
            latest[row["name"]] = row
        return {key: GraphRow.from_record(row) for key, row in latest.items()}

    # -- repair ----------------------------------------------------------------------------------

    def repair(self) -> List[Repaired]:
        """Rebuild every damaged metadata table from what can still be read, moving its folder
        aside under ``.damaged/``; sound tables are left alone.

        Rows come from the newest version of the log that loads, its data files read one by one
        (unreadable ones skipped); with no loadable version, from every readable data file in the
        folder. Either way nothing wrong is served afterwards: the latest row per DT wins, and a
        frontier lost or older than its DT's data makes the DT recompute (docs/ARCHITECTURE.md,
        "Metadata tables")."""
        with _RepairLock(self.locks, self.storage.remote), self._write_lock, self._open_lock:
            self._open.clear()
            self._cached.clear()
            return [self._repair(table) for table in SCHEMAS]

    def _repair(self, table: str) -> Repaired:
        path, schema = self.location(table), SCHEMAS[table]
        damage = _damage(path)
        if damage is None:
            return Repaired(f"{self.schema}.{table}", None)
        rows, kept_from, unreadable = _salvage(path)
        moved = f"{self.root}/{DAMAGED_DIR}/{table}-{utcnow():%Y%m%dT%H%M%S%f}"
        self.storage.move_tree(path, moved)
        storage.create_delta(path, schema=schema, configuration=LOG_SETTINGS)
        if rows:
            storage.write_delta(path, pa.Table.from_pylist(rows, schema=schema), mode="append")
        return Repaired(f"{self.schema}.{table}", damage, len(rows), kept_from, unreadable, moved)

    # -- plumbing --------------------------------------------------------------------------------

    def _damaged(self, table: str, detail: str) -> MetadataDamaged:
        return MetadataDamaged(f"{self.schema}.{table}", self.location(table), detail)

    @contextmanager
    def _reading(self, table: str) -> Iterator[None]:
        """Turns what a damaged table raises into :class:`MetadataDamaged`."""
        try:
            yield
        except (MetadataDamaged, CommitFailedError):
            raise
        except DAMAGE_ERRORS as exc:
            unreachable = storage.unreachable(exc, self.root)
            if unreachable is not None:
                raise storage.StorageUnreachable(unreachable) from exc
            raise self._damaged(table, first_line(exc)) from exc

    def _rows(
        self, table: str, name: Optional[str], since: Optional[datetime] = None
    ) -> List[Dict[str, Any]]:
        return self._or_repaired(table, lambda: self._rows_read_afresh(table, name, since))

    def _rows_read_afresh(
        self, table: str, name: Optional[str], since: Optional[datetime]
    ) -> List[Dict[str, Any]]:
        for attempt in range(TRANSIENT_RETRIES + 1):
            try:
                return self._read_rows(table, name, since)
            except MetadataDamaged:
                # What this process opened may be a table another one re-created since (a
                # repair), or a log another one was cleaning up as it was read: it is damaged
                # only if it stays so when read afresh.
                if attempt == TRANSIENT_RETRIES:
                    raise
                self._forget_open(table)
                time.sleep(0.01 * attempt)
        raise AssertionError("unreachable")

    def _or_repaired(self, table: str, work: Callable[[], _Done]) -> _Done:
        """``work`` on ``table``; when it finds the table damaged and this store repairs, the
        table is repaired and ``work`` runs again (docs/ARCHITECTURE.md, "Metadata tables")."""
        try:
            return work()
        except MetadataDamaged as damaged:
            if not self.repairs:
                raise
            self._repair_damaged(table, damaged)
        return work()

    def _repair_damaged(self, table: str, damaged: MetadataDamaged) -> None:
        """Repair ``table`` as `dyntable repair` does, one process at a time (another may have
        repaired it while this one waited: a sound table is left alone), and say so."""
        with _RepairLock(self.locks, self.storage.remote), self._write_lock, self._open_lock:
            self._forget_open(table)
            try:
                repaired = self._repair(table)
            except DAMAGE_ERRORS as exc:
                raise self._damaged(
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
        with self._write_lock:
            warnings, self._warnings = self._warnings, []
        return warnings

    def _forget_open(self, table: str) -> None:
        with self._open_lock:
            self._open.pop(table, None)
            self._cached.pop(table, None)

    def _read_rows(
        self, table: str, name: Optional[str], since: Optional[datetime] = None
    ) -> List[Dict[str, Any]]:
        with self._reading(table), self._open_lock:
            opened = self._table(table)
            if table in CACHED_TABLES:
                cached = self._cached.get(table)
                if cached is None or cached[0] != opened.version():
                    cached = self._cached[table] = (
                        opened.version(),
                        self._dataset(table).to_table().to_pylist(),
                    )
                return [dict(r) for r in cached[1] if name is None or r["name"] == name]
            dataset = self._dataset(table)
            where = ds.field("name") == name if name else None
            if since is not None:  # the history's recent rows (the runner's live page)
                recent = ds.field("refresh_start_time") >= pa.scalar(since, TS)
                where = recent if where is None else where & recent
            selected = dataset.to_table(filter=where)
        rows: List[Dict[str, Any]] = selected.to_pylist()
        return rows

    def _dataset(self, table: str) -> ds.Dataset:
        return _files_dataset(self._open[table], self.location(table))

    def _append(self, table: str, records: List[Dict[str, Any]]) -> None:
        data = pa.Table.from_pylist(records, schema=SCHEMAS[table])
        self._commit(
            table,
            lambda: write_deltalake(self._table(table), data, mode="append"),
            patch=lambda rows: rows + data.to_pylist(),
            landed=lambda: self._holds(table, records),
        )

    def _holds(self, table: str, records: List[Dict[str, Any]]) -> bool:
        """Whether ``table`` holds ``records`` (a write that failed after its commit landed)."""
        key = ROW_KEYS[table]
        held = {tuple(row[k] for k in key) for row in self._read_rows(table, None)}
        return all(tuple(record[k] for k in key) in held for record in records)

    def _table(self, table: str) -> DeltaTable:
        """``table`` at its latest version (other processes write these tables too); callers
        hold ``_open_lock`` while they use it."""
        looked: Optional[Set[str]] = getattr(self._looked, "tables", None)
        with self._reading(table), self._open_lock:
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

    def _commit(
        self,
        table: str,
        write: Callable[[], Any],
        patch: Optional[Callable[[List[Dict[str, Any]]], List[Dict[str, Any]]]] = None,
        landed: Optional[Callable[[], bool]] = None,
    ) -> None:
        """Run a metadata write, retrying when another process committed first, or cleaned up
        the log it read; ``landed`` says whether a write that failed committed all the same
        (without it the write is one that may run twice). ``patch`` turns the cached rows into
        the written version's when the write committed right after them."""
        self._or_repaired(table, lambda: self._commit_once(table, write, patch, landed))

    def _commit_once(
        self,
        table: str,
        write: Callable[[], Any],
        patch: Optional[Callable[[List[Dict[str, Any]]], List[Dict[str, Any]]]],
        landed: Optional[Callable[[], bool]],
    ) -> None:
        looked: Optional[Set[str]] = getattr(self._looked, "tables", None)
        transient = 0
        with self._write_lock, self._reading(table):
            for attempt in range(COMMIT_RETRIES):
                if looked is not None:
                    looked.discard(table)  # each attempt writes from the table's latest version
                try:
                    with self._open_lock:
                        write()
                    break
                except CommitFailedError:
                    if attempt == COMMIT_RETRIES - 1:
                        raise
                    time.sleep(0.01 * (attempt + 1))
                except (MetadataDamaged, *DAMAGE_ERRORS):
                    transient += 1
                    if transient > TRANSIENT_RETRIES:
                        raise
                    self._forget_open(table)
                    time.sleep(0.01 * transient)
                    with contextlib.suppress(MetadataDamaged, *DAMAGE_ERRORS):
                        if landed is not None and landed():
                            break
            with self._open_lock:
                cached = self._cached.pop(table, None)
                version = self._table(table).version()
                if cached is not None and patch is not None and cached[0] == version - 1:
                    self._cached[table] = (version, patch(cached[1]))
        if version % COMPACT_EVERY == 0:
            self._compact_soon(table)

    def _compact_soon(self, table: str) -> None:
        """Compact ``table`` now, or at a batch's end inside one: compaction takes 45-60 ms
        where a commit takes 6-10, and would otherwise land on whichever refresh made the
        ``COMPACT_EVERY``-th commit, inside its DT's lock (docs/ARCHITECTURE.md, "Metadata
        tables")."""
        with self._batch_lock:
            if self._batch_depth:
                self._due_compactions.add(table)
                return
            self._due_compactions.discard(table)
        self._compact(table)

    def _compact(self, table: str) -> None:
        """Drop the rows that no longer count (superseded frontiers, history older than the
        retention), then merge the table's small files, so reading it costs the same after a
        thousand refreshes as after one, and delete the files removed before
        ``VACUUM_RETENTION_HOURS``, so its folder stays as small."""
        with self._write_lock, self._reading(table), self._open_lock:
            try:
                opened = self._table(table)
                if table == FRONTIERS:
                    self._prune_frontiers(opened)
                elif table == REFRESH_HISTORY and self.history_retention_days:
                    cutoff = utcnow() - timedelta(days=self.history_retention_days)
                    opened.delete(f"refresh_start_time < '{cutoff.isoformat()}'")
                opened.optimize.compact()
                opened.vacuum(VACUUM_RETENTION_HOURS, dry_run=False, enforce_retention_duration=False)
                self._cached.pop(table, None)
            except (CommitFailedError, DeltaError):
                pass  # another process wrote meanwhile; a later commit compacts

    def _prune_frontiers(self, opened: DeltaTable) -> None:
        """Rewrite the frontiers table with each DT's latest row only. The overwrite removes the
        files it read: a row another process appends meanwhile stays."""
        rows = self._dataset(FRONTIERS).to_table()
        # Per name, the row of the newest updated_at; of equal ones the later row (a stable sort).
        order = pa.array(range(rows.num_rows), pa.int64())
        ranked = rows.select(["name", "updated_at"]).append_column("_row", order).sort_by("updated_at")
        ranked = ranked.append_column("_rank", pa.array(range(rows.num_rows), pa.int64()))
        latest = ranked.group_by("name", use_threads=False).aggregate([("_rank", "max")])
        if latest.num_rows < rows.num_rows:
            keep = pc.take(ranked.column("_row"), latest.column("_rank_max"))
            data = rows.take(keep).select(SCHEMAS[FRONTIERS].names).cast(SCHEMAS[FRONTIERS])
            write_deltalake(opened, data, mode="overwrite")


def _eq(column: str, value: str) -> str:
    return f"{column} = '" + value.replace("'", "''") + "'"


def _damage(path: str) -> Optional[str]:
    """What is wrong with the metadata table at ``path``, or None when it reads whole."""
    if not storage.is_delta_table(path):
        return NO_LOG if any(f.name.endswith(".parquet") for f in storage.of(path).files(path)) else None
    try:
        _files_dataset(storage.delta_table(path), path).to_table()
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


def _files_dataset(table: DeltaTable, location: str) -> ds.Dataset:
    """The table's live files as an Arrow dataset. The store writes plain Parquet files (reader
    protocol 1: no column mapping, no deletion vectors), so they are read as they are: 5 ms where
    deltalake's dataset, which builds an expression per file, took 15-45 ms (docs/ARCHITECTURE.md,
    "Metadata tables"). A table someone moved to a higher reader protocol is read through
    deltalake. Arrow's own file systems either way (the local one, or the object store's as
    :mod:`..storage` configures it): deltalake's default is a Python-implemented one that Arrow's
    I/O threads call back into, and a thread doing so while the interpreter exits takes the
    process down ("terminate called without an active exception")."""
    filesystem, root = storage.arrow(location)
    if table.protocol().min_reader_version > 1:  # column mapping (2), or reader features (3)
        return table.to_pyarrow_dataset(filesystem=pa_fs.SubTreeFileSystem(root, filesystem))
    files = [storage.arrow(uri)[1] for uri in table.file_uris()]
    return ds.dataset(
        files, schema=pa.schema(table.schema().to_arrow()), format="parquet", filesystem=filesystem
    )
