"""Delta log metadata read straight from a table's location, without asking an engine.

A refresh first asks "did any source change?" and "which version was current at T?". Asking the
engine costs a query each; reading the transaction log costs a directory listing. That is what makes
a NO_DATA refresh nearly free (docs/ARCHITECTURE.md, "Reading sources"), so this module answers
those questions from the log alone:

* versions and commit timestamps come from listing ``_delta_log`` (no snapshot is loaded);
* snapshots (schema, table id, configuration, live files) come from the ``deltalake`` package,
  or from an earlier one and the commits after it when those only add and remove files;
* an :class:`Interval` ``(v0, v1]`` is the difference of the two snapshots' file sets (files in
  both cancel) less what its compaction commits rewrote, checked against the interval's own
  commits for what makes a file-set difference wrong: deletion vectors, schema or table-id
  changes, cleaned-up log entries, vacuumed files.

Reading the rows of an interval's files is the job of :mod:`.changes`.
"""

from __future__ import annotations

import bisect
import json
import os
import re
import threading
import time
import urllib.parse
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from enum import Enum
from functools import cached_property
from pathlib import Path
from typing import Any, Dict, Generic, Iterable, Iterator, List, Mapping, Optional, Set, Tuple, TypeVar, Union

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
)

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.vocabulary import fingerprint

LOG_DIR = "_delta_log"
#: Rewritten by every checkpoint, before the cleanup of expired commits that follows one.
LAST_CHECKPOINT = "_last_checkpoint"


def commit_file(version: int) -> str:
    """The path of ``version``'s commit, relative to the table's root."""
    return f"{LOG_DIR}/{version:020d}.json"


COMMIT_FILE = re.compile(r"^(\d{20})\.json$")
#: Classic, multi-part (`.checkpoint.0000000001.0000000003.parquet`) and V2 (`.checkpoint.<uuid>.json`).
CHECKPOINT_FILE = re.compile(r"^(\d{20})\.checkpoint(?:\.[^.]+|\.\d{10}\.\d{10})?\.(?:parquet|json)$")
COLUMN_MAPPING_MODE = "delta.columnMapping.mode"
#: The table setting that has MERGE, DELETE and UPDATE mark removed rows in deletion vectors.
DELETION_VECTORS = "delta.enableDeletionVectors"
#: The writer features a table carries once deletion vectors are enabled on it (the other two come
#: with the writer protocol 7 that table features need).
DELETION_VECTOR_FEATURES = frozenset({"deletionVectors", "appendOnly", "invariants"})
CHANGE_DATA_FEED = "delta.enableChangeDataFeed"
CHECKPOINT_INTERVAL = "delta.checkpointInterval"
#: Delta's default checkpoint interval, which delta-spark and Sail follow (deltalake's is 100).
DEFAULT_CHECKPOINT_INTERVAL = 10
#: Snapshots are immutable per version; a refresh touches two or three of them per source.
SNAPSHOT_CACHE_SIZE = 8
#: Snapshots shared by every instance in the process, keyed by location, version and the digest of
#: that version's commit (a table re-created at the same location writes new commits). The DTs of
#: one `dbt run` read the same source versions, and a runner's next tick reads as its start the
#: version the last one ended at: each is loaded once (docs/ARCHITECTURE.md, "Reading sources").
SHARED_SNAPSHOT_CACHE_SIZE = 64
#: Per location, the ``deltalake`` table object of the newest version loaded and the identity of
#: that version's commit: a later version is loaded from it by replaying only the commits between
#: (``load_as_version``), not from the last checkpoint. A source's next version, and a DT's version
#: after its MERGE, are one or a few commits on (docs/ARCHITECTURE.md, "Reading sources"). Taken
#: out while in use, so no two threads move one object.
REPLAY_BASE_CACHE_SIZE = 64
#: Commits a snapshot is built forward over from an earlier one this process holds, when they only
#: add and remove files (``DeltaLog._applied``), before ``deltalake`` replays them instead.
APPLIED_COMMITS = 64
#: Locations whose newest snapshots this process keeps: per location, the version and commit
#: identity of the snapshot it built or used last, the base ``DeltaLog._applied`` builds on when
#: the instance asking holds none (each refresh opens its DT's log afresh, and asks it for the
#: version its own commit made).
LAST_SNAPSHOT_CACHE_SIZE = 256
#: Actions a commit may hold and still be applied to the previous snapshot by ``DeltaLog._applied``:
#: none of them changes the table's metadata, protocol or domain metadata (clustering columns).
FILE_ONLY_ACTIONS = frozenset({"commitInfo", "add", "remove", "txn", "cdc"})
#: Types of partition column whose values, strings in an ``add`` action, ``DeltaLog._applied``
#: types itself, as ``deltalake`` does. A table partitioned by any other type (timestamps, whose
#: strings writers disagree on the time zone of; binary) is loaded by ``deltalake``.
APPLIED_PARTITION_TYPES = (
    StringType,
    DateType,
    BooleanType,
    ByteType,
    ShortType,
    IntegerType,
    LongType,
    FloatType,
    DoubleType,
    DecimalType,
)
#: A local ``_delta_log``'s listing is reused while the folder is the same one with the same
#: modification time, and that time is older than this before the listing was taken: a folder
#: changed within the same tick of a coarse clock would otherwise look unchanged (git's index
#: treats such entries as "racily clean" the same way). Otherwise a few stats extend it by the
#: commits written since (``DeltaLog._extended``). A source with a month of commits holds
#: thousands of files, and a refresh asks for its versions several times (docs/ARCHITECTURE.md,
#: "Reading sources").
LISTING_RACY_NS = 2_000_000_000
#: New commits a listing is extended by, one stat each, before the log is listed again instead.
PROBED_COMMITS = 64
#: Listings kept, least recently used dropped first: one per source a process reads, so a runner
#: over a warehouse of thousands of tables does not keep every log's listing for its lifetime.
LISTING_CACHE_SIZE = 256

#: A local folder's device, inode and modification time (ns).
FolderStamp = Tuple[int, int, int]


def folder_stamp(folder: Union[str, Path]) -> Optional[FolderStamp]:
    """A local folder's :data:`FolderStamp`; None when it cannot be read."""
    try:
        found = os.stat(folder)
    except OSError:
        return None
    return (found.st_dev, found.st_ino, found.st_mtime_ns)


def folder_unchanged(stamp: Optional[FolderStamp], seen: FolderStamp, seen_at_ns: int) -> bool:
    """Whether a folder stamped ``seen`` at ``seen_at_ns`` (``time.time_ns``) holds the same
    files now that it is stamped ``stamp``: the same folder, last modified at the same time, and
    that time older than :data:`LISTING_RACY_NS` before ``seen_at_ns``."""
    return stamp == seen and seen[2] < seen_at_ns - LISTING_RACY_NS


_Key = TypeVar("_Key")
_Value = TypeVar("_Value")


class _Lru(Generic[_Key, _Value]):
    """A map that keeps its ``size`` most recently used entries; safe across threads."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: "OrderedDict[_Key, _Value]" = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: _Key) -> Optional[_Value]:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: _Key, value: _Value) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            if len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def pop(self, key: _Key) -> Optional[_Value]:
        with self._lock:
            return self._entries.pop(key, None)

    def __iter__(self) -> Iterator[_Key]:
        with self._lock:
            return iter(list(self._entries))


_shared_snapshots: "_Lru[Tuple[str, int, str], Snapshot]" = _Lru(SHARED_SNAPSHOT_CACHE_SIZE)
_replay_bases: "_Lru[str, Tuple[int, str, DeltaTable]]" = _Lru(REPLAY_BASE_CACHE_SIZE)
_listings: "_Lru[str, Tuple[Tuple[int, int, int], int, _Listing]]" = _Lru(LISTING_CACHE_SIZE)
_last_snapshots: "_Lru[str, Tuple[str, int, str]]" = _Lru(LAST_SNAPSHOT_CACHE_SIZE)
#: Intervals read by the process, keyed by location and both ends' versions and commits: the DTs
#: of one run over the same source read its same interval, which after a run of ten thousand
#: small commits is that many commit files to parse (docs/ARCHITECTURE.md, "Reading sources").
_shared_intervals: "_Lru[Tuple[str, int, str, int, str, Optional[str]], Interval]" = _Lru(
    SHARED_SNAPSHOT_CACHE_SIZE
)
#: An object store's listings, by log folder: extended by one request listing from the latest
#: commit on (docs/ARCHITECTURE.md, "Object storage").
_object_listings: "_Lru[str, _Listing]" = _Lru(LISTING_CACHE_SIZE)
#: Commit identities read from an object store, by location, version and the object's tag: a
#: commit is read once per process (an object's tag changes with its bytes).
_object_commit_ids: "_Lru[Tuple[str, int, str], str]" = _Lru(LISTING_CACHE_SIZE * 16)
#: In-commit timestamps read from an object store, kept as the identities are.
_object_commit_icts: "_Lru[Tuple[str, int, str], Tuple[Optional[int]]]" = _Lru(LISTING_CACHE_SIZE * 16)


#: Writes this process made to any table, counted: an object store's listing held by a DeltaLog
#: answers its next question while the count is unchanged (each would be a request), and is taken
#: again after a write, which may have been to its table (docs/ARCHITECTURE.md, "Object storage").
_writes = [0]
_writes_lock = threading.Lock()


def note_write() -> None:
    """This process wrote (a statement of its engine, or deltalake): listings held are retaken."""
    with _writes_lock:
        _writes[0] += 1


class DeltaLogError(RuntimeError):
    """The log could not answer; the message says which table and why."""


class TableNotFound(DeltaLogError):
    """No Delta table (no ``_delta_log`` with commits) at the location."""


class HistoryUnavailable(DeltaLogError):
    """The log entries needed for a version were cleaned up, or the version does not exist."""


class CommitUnreadable(HistoryUnavailable):
    """A commit file is there but does not parse (truncated, corrupt): damage, not a cleanup."""


class IntervalKind(str, Enum):
    """The change shapes of docs/ARCHITECTURE.md, "Reading sources", decided from file sets alone."""

    EMPTY = "EMPTY"
    """No file added or removed: the table's rows did not change."""
    ADDED_ONLY = "ADDED_ONLY"
    """Only inserts: read the added files, no consolidation needed."""
    REMOVED_ONLY = "REMOVED_ONLY"
    """Only deletes of whole files: read the removed files."""
    MIXED = "MIXED"
    """Files added and removed (updates, merges, partial deletes): the MINIMIZE shape."""


@dataclass(frozen=True)
class DataFile:
    """One live data file of a snapshot (an ``add`` action)."""

    path: str
    """As recorded in the log: URI-encoded, relative to the table root unless absolute."""
    uri: str
    """Absolute URI an engine reads (``file:///...`` for local tables)."""
    size_bytes: int
    num_records: Optional[int]
    """From the file's statistics; None when the writer recorded none."""
    partition_values: Mapping[str, Any]
    """Typed Python values (``date``, aware ``datetime`` for timestamps, ``Decimal`` ...)."""
    has_deletion_vector: bool


@dataclass(frozen=True)
class Snapshot:
    """What a version of the table is: identity, schema, configuration and live files."""

    version: int
    table_id: str
    schema_json: str
    """The Delta schema as Spark's StructType JSON."""
    partition_columns: Tuple[str, ...]
    configuration: Mapping[str, str]
    files: Mapping[str, DataFile]
    """Keyed by :attr:`DataFile.path`."""
    deleted_rows: Mapping[str, "np.ndarray[Any, Any]"] = field(default_factory=dict)
    """Per :attr:`DataFile.path` of a file with a deletion vector: the positions of the rows it
    masks (docs/ARCHITECTURE.md, "Reading sources")."""
    description: Optional[str] = None
    """The table's comment."""
    writer_features: Tuple[str, ...] = ()
    """The protocol's writer table features (``clustering``, ``deletionVectors``, ...)."""
    min_writer_version: int = 2
    """The protocol's writer version: 3 to 6 carry features by number (CHECK constraints; change
    data feed and generated columns; column mapping; identity columns), 7 lists them."""
    min_reader_version: int = 1
    """The protocol's reader version: above 1 a reader needs more than the data files (column
    mapping, deletion vectors, other reader features)."""
    reader_features: Tuple[str, ...] = ()
    """The protocol's reader table features (``deletionVectors``, ...), at reader version 3."""

    @property
    def schema(self) -> StructType:
        return StructType.fromJson(json.loads(self.schema_json))

    @property
    def column_mapping_mode(self) -> str:
        return (self.configuration.get(COLUMN_MAPPING_MODE) or "none").lower()

    @property
    def rows_are_files_rows(self) -> bool:
        """Its rows are its data files' rows: reader protocol 1, or deletion vectors enabled (the
        reader feature of a dynamic table) where no file has one yet."""
        if self.min_reader_version == 1:
            return True
        return (
            set(self.reader_features) == {"deletionVectors"}
            and self.column_mapping_mode == "none"
            and not self.deleted_rows
        )


@dataclass(frozen=True)
class Interval:
    """The change of a table over versions ``(v0, v1]`` as added and removed files.

    Rows of ``added`` count +1, rows of ``removed`` -1; a row copied unchanged by a
    copy-on-write rewrite appears on both sides and cancels when consolidated. Check
    :attr:`undifferentiable_reason` first: when it is set, the file sets may be incomplete
    and the consumer must recompute (REINITIALIZE) instead.
    """

    v0: int
    v1: int
    added: Tuple[DataFile, ...] = ()
    removed: Tuple[DataFile, ...] = ()
    undifferentiable_reason: Optional[str] = None
    masked: Tuple[DataFile, ...] = ()
    """Files live at both ends whose deletion vector grew: the rows it newly masks count -1."""
    changed_rows: Optional[int] = None
    """The rows the interval's commits removed or added, by their writers' metrics
    (:attr:`_Commit.changed_rows`); None when a commit did not record them."""
    masked_rows: int = 0
    """The rows the deletion vectors of :attr:`masked` newly mask."""

    @property
    def kind(self) -> IntervalKind:
        removes = self.removed or self.masked
        if self.added and removes:
            return IntervalKind.MIXED
        if self.added:
            return IntervalKind.ADDED_ONLY
        if removes:
            return IntervalKind.REMOVED_ONLY
        return IntervalKind.EMPTY

    @property
    def differentiable(self) -> bool:
        return self.undifferentiable_reason is None

    @property
    def added_rows(self) -> Optional[int]:
        return _total_rows(self.added)

    @property
    def removed_rows(self) -> Optional[int]:
        """Rows of removed files, and the rows deletion vectors newly mask: those are read from
        the row groups holding them, not with their whole files (``changes.changes_dataframe``)."""
        removed = _total_rows(self.removed)
        return None if removed is None else removed + self.masked_rows

    @property
    def added_bytes(self) -> int:
        return sum(f.size_bytes for f in self.added)

    @property
    def removed_bytes(self) -> int:
        """Bytes of removed files, and the newly masked rows' share of their files' bytes."""
        masked_bytes = sum(f.size_bytes for f in self.masked)
        masked_files_rows = _total_rows(self.masked)
        if masked_files_rows:
            masked_bytes = masked_bytes * min(self.masked_rows, masked_files_rows) // masked_files_rows
        return sum(f.size_bytes for f in self.removed) + masked_bytes


def _total_rows(files: Tuple[DataFile, ...]) -> Optional[int]:
    return _known_sum(f.num_records for f in files)


def _newly_masked(before: Snapshot, after: Snapshot, path: str) -> int:
    """How many rows of file ``path`` the deletion vector at ``after`` masks that it did not at
    ``before``."""
    masked = after.deleted_rows.get(path)
    if masked is None:
        return 0
    return len(np.setdiff1d(masked, before.deleted_rows.get(path, np.empty(0, np.int64))))


def _known_sum(counts: Iterable[Optional[int]]) -> Optional[int]:
    """The sum of ``counts``; None when any is unknown."""
    known = list(counts)
    return None if any(c is None for c in known) else sum(c for c in known if c is not None)


@dataclass(frozen=True)
class _Listing:
    """One listing of ``_delta_log``: commit files with their modification times."""

    commit_mtimes_ms: Mapping[int, int]
    checkpoints: Tuple[int, ...]
    last_checkpoint_ns: Optional[int] = None
    """``_last_checkpoint``'s modification time, None without one."""
    complete_from: Optional[int] = None
    """Listed from this version on (an object store's log is listed from a version it needs,
    not whole); None: every file was listed."""
    tags: Mapping[int, str] = field(default_factory=dict)
    """Per commit, its object's tag (an object store's ETag): a commit written anew has another."""
    last_checkpoint_tag: Optional[str] = None

    # Computed once: a log keeps up to tens of thousands of commits, and a refresh asks for its
    # latest version a dozen times.
    @cached_property
    def first_commit(self) -> Optional[int]:
        return min(self.commit_mtimes_ms) if self.commit_mtimes_ms else None

    @cached_property
    def last_commit(self) -> Optional[int]:
        return max(self.commit_mtimes_ms) if self.commit_mtimes_ms else None

    @cached_property
    def latest(self) -> Optional[int]:
        versions = [v for v in (self.last_commit, *self.checkpoints[-1:]) if v is not None]
        return max(versions) if versions else None

    @property
    def earliest_loadable(self) -> Optional[int]:
        """The first version a snapshot can be rebuilt for: 0 while its commit exists, else the
        oldest checkpoint (commits before it were cleaned up)."""
        if self.complete_from is not None:
            return self.complete_from
        if 0 in self.commit_mtimes_ms:
            return 0
        if self.checkpoints:
            return min(self.checkpoints)
        return self.first_commit


def _object_files_listing(files: Iterable[storage.ObjectInfo], start: Optional[int]) -> _Listing:
    """A :class:`_Listing` of an object store's log files (listed from version ``start`` on)."""
    commits: Dict[int, int] = {}
    tags: Dict[int, str] = {}
    checkpoints: List[int] = []
    hint_ns, hint_tag = None, None
    for found in files:
        if match := COMMIT_FILE.match(found.name):
            version = int(match.group(1))
            commits[version] = found.mtime_ns // 1_000_000
            tags[version] = found.tag
        elif match := CHECKPOINT_FILE.match(found.name):
            checkpoints.append(int(match.group(1)))
        elif found.name == LAST_CHECKPOINT:
            hint_ns, hint_tag = found.mtime_ns, found.tag
    return _Listing(commits, tuple(sorted(set(checkpoints))), hint_ns, start, tags, hint_tag)


def _mtime_ms(info: pafs.FileInfo) -> int:
    return info.mtime_ns // 1_000_000 if info.mtime_ns else 0


@dataclass(frozen=True)
class _FileActions:
    """The files a commit adds (its ``add`` actions) and removes (their paths)."""

    added: Tuple[Mapping[str, Any], ...]
    removed: Tuple[str, ...]


@dataclass
class _Commit:
    """The actions of one commit file that matter for differentiation."""

    version: int
    identity: str
    """A digest of the commit file: two commits with the same version number are the same commit
    only if their identities are equal (a re-created table writes new ones)."""
    commit_info: Mapping[str, Any]
    metadata: Optional[Mapping[str, Any]]
    changes_data: bool
    """Some add/remove action has ``dataChange`` true (compaction commits have none)."""
    deletion_vector_paths: List[str] = field(default_factory=list)
    touches_files: bool = False
    """The commit has add or remove actions."""
    file_actions: Optional["_FileActions"] = None
    """Its adds and removes when they are all it changes (:data:`FILE_ONLY_ACTIONS`, no deletion
    vector); None when it changes more."""

    removes_files: bool = False
    """The commit has a ``remove`` action that changes data."""

    @property
    def operation(self) -> str:
        return str(self.commit_info.get("operation") or "")

    @property
    def metrics(self) -> Dict[str, int]:
        """The row and file counts its writer recorded in ``commitInfo.operationMetrics``, by
        delta-spark's names (``numTargetRowsInserted``, ...): delta-spark writes them as text,
        Sail as numbers, and delta-rs in snake case (``num_target_rows_inserted``)."""
        metrics = self.commit_info.get("operationMetrics") or {}
        return {
            _camel_case(name): int(value)
            for name, value in metrics.items()
            if str(value).lstrip("-").isdigit()
        }

    @property
    def rows_added_and_removed(self) -> Optional[Tuple[int, int]]:
        """The rows this commit added and removed, an updated row being one of each: what its
        writer says it inserted, updated and deleted (UPDATE, DELETE and MERGE metrics), or, for
        a commit that only adds files, the rows it wrote. None when it recorded neither, as where
        an overwrite removes files without counting their rows."""
        if not self.changes_data:
            return 0, 0
        metrics = self.metrics
        if any(name in metrics for name in _CHANGED_ROW_METRICS):
            updated = metrics.get("numUpdatedRows", 0) + metrics.get("numTargetRowsUpdated", 0)
            inserted = metrics.get("numTargetRowsInserted", 0)
            deleted = metrics.get("numDeletedRows", 0) + metrics.get("numTargetRowsDeleted", 0)
            return inserted + updated, deleted + updated
        written = metrics.get("numOutputRows", metrics.get("numAddedRows"))
        return None if self.removes_files or written is None else (written, 0)

    @property
    def changed_rows(self) -> Optional[int]:
        """The rows this commit removed or added (:attr:`rows_added_and_removed`)."""
        rows = self.rows_added_and_removed
        return None if rows is None else sum(rows)

    @property
    def rearranges(self) -> bool:
        """Rewrites files without changing rows (a compaction: every action ``dataChange`` false)."""
        return self.touches_files and not self.changes_data


#: The operations of a ``CREATE OR REPLACE TABLE`` (dbt's `table` models on Delta): the table keeps
#: its log, so an interval across one is read like an overwrite (docs/ARCHITECTURE.md, "Reading
#: sources"), although delta-spark records a new table id.
REPLACE_OPERATIONS = frozenset(
    {
        "CREATE OR REPLACE TABLE AS SELECT",
        "REPLACE TABLE AS SELECT",
        "CREATE OR REPLACE TABLE",
        "REPLACE TABLE",
    }
)

#: The operation metrics that count the rows an UPDATE, DELETE or MERGE changed.
_CHANGED_ROW_METRICS = (
    "numUpdatedRows",
    "numDeletedRows",
    "numTargetRowsInserted",
    "numTargetRowsUpdated",
    "numTargetRowsDeleted",
)


def _camel_case(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)


class DeltaLog:
    """Read-only view of one Delta table's transaction log.

    Cheap to create. Snapshots and parsed commits are cached per instance, by version: a table
    dropped and re-created at the same location reuses version numbers, so the instance forgets
    them when a listing shows the latest commit it had listed written anew (:meth:`_listing`).
    Keep an instance for one refresh rather than for the life of a process. Snapshots are also
    shared across instances, keyed by their commit's fingerprint, which re-creation changes.
    """

    def __init__(self, location: Union[str, Path], since: Optional[int] = None) -> None:
        """``since``: the version the caller will ask about first (a source's consumed version),
        where an object store's log is listed from when this process has not listed it yet."""
        text = str(location)
        if "://" not in text and not text.startswith("file:"):
            text = str(Path(text).expanduser().resolve())
        self.location = storage.normalized(text.rstrip("/"))
        self._storage = storage.of(self.location)
        self._remote = self._storage.remote
        self._fs, self._root = storage.arrow(self.location)
        self._root = self._root.rstrip("/")
        local = isinstance(self._fs, pafs.LocalFileSystem)
        self.root_uri = Path(self._root).as_uri() if local else self.location
        self._since = since
        self._raw: Dict[int, bytes] = {}
        #: An object store's listing and the write count it was taken at (see ``note_write``).
        self._answered: Optional[Tuple[int, _Listing]] = None
        self._snapshots: "_Lru[int, Snapshot]" = _Lru(SNAPSHOT_CACHE_SIZE)
        self._commits: Dict[int, _Commit] = {}
        self._commit_ict: Dict[int, Optional[int]] = {}
        self._commit_ids: Dict[int, str] = {}
        self._held: Optional[_Listing] = None
        self._seen: Optional[_Listing] = None

    def __repr__(self) -> str:
        return f"DeltaLog({self.location!r})"

    # -- versions and time ------------------------------------------------------------------------

    def exists(self) -> bool:
        return self._listing().latest is not None

    def latest_version(self) -> int:
        """The newest committed version, from one listing of ``_delta_log``."""
        latest = self._listing().latest
        if latest is None:
            raise TableNotFound(f"No Delta table at {self.location} (no commits in {LOG_DIR}).")
        return latest

    def latest_checkpoint(self, *, now: bool = False) -> Optional[int]:
        """The version of the newest checkpoint, None without one; with ``now``, as the log is
        now, where this instance answers from an earlier listing (:meth:`hold_listing`)."""
        listing = (self._object_list() if self._remote else self._list()) if now else self._listing()
        checkpoints = listing.checkpoints
        return checkpoints[-1] if checkpoints else None

    def commit_timestamp(self, version: int) -> int:
        """When ``version`` was committed, in epoch milliseconds.

        Per the Delta protocol: the commit's in-commit timestamp where the table records one,
        else the commit file's modification time, made strictly increasing over versions as
        Delta Spark does, so that "latest version at T" is well defined.
        """
        listing = self._listing()
        if listing.complete_from is not None and version < listing.complete_from:
            listing = self._listed_from(version)
        versions, stamps = self._timeline(listing)
        position = bisect.bisect_left(versions, version)
        if position == len(versions) or versions[position] != version:
            raise HistoryUnavailable(
                f"Version {version} of {self.location} has no loadable commit in {LOG_DIR} "
                f"(versions {versions[0] if versions else '-'}..{versions[-1] if versions else '-'} remain)."
            )
        return stamps[position]

    def version_at(self, timestamp_ms: int) -> Optional[int]:
        """The latest version committed at or before ``timestamp_ms``; None if the table did not
        exist yet. Raises :class:`HistoryUnavailable` if the versions around T were cleaned up.

        A commit being written while T passes can still land with a timestamp at or before T;
        callers pick a T slightly in the past before relying on the answer being final.
        """
        listing = self._listing()
        if listing.latest is None:
            raise TableNotFound(f"No Delta table at {self.location} (no commits in {LOG_DIR}).")
        versions, stamps = self._timeline(listing)
        position = bisect.bisect_right(stamps, timestamp_ms)
        if position == 0 and listing.complete_from is not None:
            # Listed from a later version on than T needs: list the whole log.
            versions, stamps = self._timeline(self._listed_from(None))
            position = bisect.bisect_right(stamps, timestamp_ms)
        if position == 0:
            if versions and versions[0] == 0:
                return None
            raise HistoryUnavailable(
                f"{self.location}: the log before version {versions[0] if versions else '?'} was "
                f"cleaned up, so the version current at {timestamp_ms} ms is unknown."
            )
        return versions[position - 1]

    def _timeline(self, listing: _Listing) -> Tuple[List[int], List[int]]:
        """Loadable versions and their monotonised commit timestamps, ascending."""
        earliest = listing.earliest_loadable
        versions = sorted(v for v in listing.commit_mtimes_ms if earliest is not None and v >= earliest)
        use_ict = bool(versions) and self._in_commit_timestamp(versions[-1]) is not None
        stamps: List[int] = []
        for version in versions:
            raw = listing.commit_mtimes_ms[version]
            if use_ict:
                raw = self._in_commit_timestamp(version) or raw
            stamps.append(max(raw, stamps[-1] + 1) if stamps else raw)
        return versions, stamps

    def _in_commit_timestamp(self, version: int) -> Optional[int]:
        """The commit's in-commit timestamp. Where a table records them, commitInfo is its
        commits' first action (Delta protocol, "In-Commit Timestamps"): one line is parsed, not
        the compaction's thousands of file actions."""
        if version not in self._commit_ict and self._remote:
            known = _object_commit_icts.get((self.location, version, self._listing().tags.get(version, "")))
            if known is not None:
                self._commit_ict[version] = known[0]
        if version not in self._commit_ict:
            parsed = self._commits.get(version)
            if parsed is not None:
                value = parsed.commit_info.get("inCommitTimestamp")
            else:
                first = self._commit_bytes(version).split(b"\n", 1)[0]
                info = (json.loads(first).get("commitInfo") if first.strip() else None) or {}
                value = info.get("inCommitTimestamp")
            self._commit_ict[version] = int(value) if value is not None else None
            tag = self._listing().tags.get(version) if self._remote else None
            if tag:
                _object_commit_icts.put((self.location, version, tag), (self._commit_ict[version],))
        return self._commit_ict[version]

    def hold_listing(self) -> "DeltaLog":
        """From now on answer from one listing, taken now: a refresh reads each source at the
        version it observed, so commits landing later are the next refresh's, and the source's
        log is not listed again for each question (docs/ARCHITECTURE.md, "Reading sources").
        Never for a table the caller writes."""
        self._held = self._listing()
        return self

    def _listing(self) -> _Listing:
        if self._held is not None:
            return self._held
        listing = self._list()
        seen, self._seen = self._seen, listing
        if seen is not None and seen is not listing and seen.last_commit is not None:
            # The latest commit listed before is gone or written anew: the table was re-created
            # in its folder (a partitioned DT replaced on the embedded engine, a source dropped
            # and written again), and this instance's versions name other commits now.
            last = seen.last_commit
            if listing.commit_mtimes_ms.get(last) != seen.commit_mtimes_ms[last] or listing.tags.get(
                last
            ) != seen.tags.get(last):
                self._forget_versions()
        return listing

    def _forget_versions(self) -> None:
        self._snapshots = _Lru(SNAPSHOT_CACHE_SIZE)
        self._commits.clear()
        self._commit_ict.clear()
        self._commit_ids.clear()

    def _list(self) -> _Listing:
        if self._remote:
            # Questions asked of one instance (one refresh's) between this process's writes are
            # answered from one listing; another process's commit meanwhile is as one landing
            # just after it.
            writes = _writes[0]
            if self._answered is not None and self._answered[0] == writes:
                return self._answered[1]
            listing = self._object_list()
            self._answered = (writes, listing)
            return listing
        folder = f"{self._root}/{LOG_DIR}"
        listed_at = time.time_ns()
        stamp = folder_stamp(folder) if isinstance(self._fs, pafs.LocalFileSystem) else None
        if stamp is not None:
            cached = _listings.get(folder)
            if cached is not None and cached[0][:2] == stamp[:2]:
                if folder_unchanged(stamp, cached[0], cached[1]):
                    return cached[2]
                extended = self._extended(folder, cached[2])
                if extended is not None:
                    _listings.put(folder, (stamp, listed_at, extended))
                    return extended
        try:
            infos = self._fs.get_file_info(pafs.FileSelector(folder))
        except FileNotFoundError:
            return _Listing({}, ())
        commits: Dict[int, int] = {}
        checkpoints: List[int] = []
        last_checkpoint_ns = None
        for info in infos:
            if match := COMMIT_FILE.match(info.base_name):
                commits[int(match.group(1))] = _mtime_ms(info)
            elif match := CHECKPOINT_FILE.match(info.base_name):
                checkpoints.append(int(match.group(1)))
            elif info.base_name == LAST_CHECKPOINT:
                last_checkpoint_ns = info.mtime_ns
        listing = _Listing(commits, tuple(sorted(set(checkpoints))), last_checkpoint_ns)
        if stamp is not None:
            _listings.put(folder, (stamp, listed_at, listing))
        return listing

    def _extended(self, folder: str, listing: _Listing) -> Optional[_Listing]:
        """``listing`` with the commits written since it was taken, from a few stats; None when
        only a new listing can tell what changed.

        Commits are written in version order: the new ones follow its latest, up to the first
        missing. What else changes a log goes with a change these stats see: a checkpoint, and
        the cleanup of expired commits after one, rewrite ``_last_checkpoint``; a cleanup run by
        hand removes the earliest commit; a table re-created in the folder wrote its latest
        commit anew. A table written every minute keeps tens of thousands of commits, and a DT
        gains one with each refresh (docs/ARCHITECTURE.md, "Reading sources")."""
        if listing.first_commit is None or listing.last_commit is None:
            return None
        first, last, hint = self._fs.get_file_info(
            [
                f"{folder}/{listing.first_commit:020d}.json",
                f"{folder}/{listing.last_commit:020d}.json",
                f"{folder}/{LAST_CHECKPOINT}",
            ]
        )
        if (
            first.type == pafs.FileType.NotFound
            or last.type == pafs.FileType.NotFound
            or _mtime_ms(last) != listing.commit_mtimes_ms[listing.last_commit]
            or (None if hint.type == pafs.FileType.NotFound else hint.mtime_ns) != listing.last_checkpoint_ns
        ):
            return None
        added: Dict[int, int] = {}
        while len(added) < PROBED_COMMITS:
            version = listing.last_commit + len(added) + 1
            info = self._fs.get_file_info(f"{folder}/{version:020d}.json")
            if info.type == pafs.FileType.NotFound:
                if not added:
                    return listing
                commits = {**listing.commit_mtimes_ms, **added}
                return _Listing(commits, listing.checkpoints, listing.last_checkpoint_ns)
            added[version] = _mtime_ms(info)
        return None

    # -- an object store's log ---------------------------------------------------------------------

    def _object_list(self) -> _Listing:
        """The log of a table in an object store, listed with one request where this process
        listed it before (from its latest commit on) or the caller named the version it needs
        (from there on); else from its last checkpoint on: a request per thousand files listed,
        so the cost does not grow with the log's history (docs/ARCHITECTURE.md, "Object
        storage")."""
        folder = f"{self.location}/{LOG_DIR}"
        cached = _object_listings.get(folder)
        listing = None
        if cached is not None and cached.last_commit is not None:
            listing = self._object_extended(folder, cached)
        if listing is None and self._since is not None:
            listing = self._object_listing(folder, self._since)
        if listing is None:
            listing = self._object_listing(folder, self._last_checkpoint_version(folder))
        if listing is None:
            listing = self._object_listing(folder, None)
        assert listing is not None  # a listing of everything always answers
        _object_listings.put(folder, listing)
        return listing

    def _listed_from(self, version: Optional[int]) -> _Listing:
        """The log listed from ``version`` on (None: whole), kept for the process."""
        folder = f"{self.location}/{LOG_DIR}"
        listing = self._object_listing(folder, version) or self._object_listing(folder, None)
        assert listing is not None
        _object_listings.put(folder, listing)
        if self._held is not None:
            self._held = listing
        self._seen = listing
        self._answered = (_writes[0], listing)
        return listing

    def _object_listing(self, folder: str, start: Optional[int]) -> Optional[_Listing]:
        """The files of ``folder`` from version ``start`` on (None: all); None when ``start``'s
        commit is not there (gone, or never written)."""
        files = self._storage.files(folder, after=None if start is None else f"{start:020d}")
        listing = _object_files_listing(files, start)
        if start is not None and start not in listing.commit_mtimes_ms:
            return None
        return listing

    def _object_extended(self, folder: str, cached: _Listing) -> Optional[_Listing]:
        """``cached`` with the commits written since, from one request listing from its latest
        commit on; None when that commit is gone or written anew (a table re-created)."""
        last = cached.last_commit
        assert last is not None
        files = self._storage.files(folder, after=f"{last:020d}")
        newer = _object_files_listing(files, last)
        if newer.tags.get(last) != cached.tags.get(last) or last not in newer.commit_mtimes_ms:
            return None
        start = cached.complete_from
        if newer.last_checkpoint_tag != cached.last_checkpoint_tag:
            # A checkpoint, after which expired commits may be cleaned up: what was listed
            # before the newest checkpoint may be gone.
            start = max(start or 0, newer.checkpoints[-1]) if newer.checkpoints else start
        kept = {v: t for v, t in cached.commit_mtimes_ms.items() if start is None or v >= start}
        tags = {v: t for v, t in cached.tags.items() if start is None or v >= start}
        checkpoints = sorted(
            {c for c in cached.checkpoints if start is None or c >= start} | set(newer.checkpoints)
        )
        return _Listing(
            {**kept, **newer.commit_mtimes_ms},
            tuple(checkpoints),
            newer.last_checkpoint_ns,
            start,
            {**tags, **newer.tags},
            newer.last_checkpoint_tag,
        )

    def _last_checkpoint_version(self, folder: str) -> Optional[int]:
        """The version ``_last_checkpoint`` names; None without one, or one that does not parse."""
        raw = self._storage.read(f"{folder}/{LAST_CHECKPOINT}")
        try:
            return int(json.loads(raw)["version"]) if raw else None
        except (ValueError, KeyError, TypeError):
            return None

    # -- snapshots --------------------------------------------------------------------------------

    def snapshot(self, version: int) -> Snapshot:
        """The table at ``version`` (cached); :class:`HistoryUnavailable` if it cannot be rebuilt."""
        cached = self._snapshots.get(version)
        if cached is not None:
            return cached
        key = self._shared_key(version)
        shared = _shared_snapshots.get(key) if key is not None else None
        snapshot = shared or self._applied(version) or self._load_snapshot(version)
        if key is not None:
            if shared is None:
                _shared_snapshots.put(key, snapshot)
            _last_snapshots.put(self.location, key)
        self._snapshots.put(version, snapshot)
        return snapshot

    def _shared_key(self, version: int) -> Optional[Tuple[str, int, str]]:
        """The process-wide cache key of ``version``; None when its commit file is gone (a
        checkpoint may still rebuild it, uncached)."""
        try:
            return self.location, version, self._read_commit(version).identity
        except HistoryUnavailable:
            return None

    def _applied(self, version: int) -> Optional[Snapshot]:
        """``version`` built from the newest earlier snapshot this instance holds (at most
        :data:`APPLIED_COMMITS` back, or any number when this instance read the commits between
        already, as an interval's do) by applying the adds and removes of the commits between,
        when that is all they do: what ``deltalake`` would replay, without reading the log again
        (docs/ARCHITECTURE.md, "Reading sources"). deltalake reads a long run of commits with a
        file open for each at once: 1,000 open files for 2,000 one-row commits. None when there is
        no such base, a commit between changes more, or a partition value is not one
        :func:`typed_partition_values` types."""
        held = [
            v
            for v in self._snapshots
            if v < version and (version - APPLIED_COMMITS <= v or self._read_between(v, version))
        ]
        base = self._snapshots.get(max(held)) if held else self._last_shared(version)
        if base is None or (base.partition_columns and base.column_mapping_mode != "none"):
            # Under column mapping, partition values are keyed by physical column names.
            return None
        try:
            commits = [self._read_commit(v) for v in range(base.version + 1, version + 1)]
        except HistoryUnavailable:
            return None
        files = dict(base.files)
        deleted_rows = dict(base.deleted_rows)
        schema = base.schema
        for commit in commits:
            applied = commit.file_actions
            if applied is None:
                return None
            partitions = typed_partition_values(
                schema, base.partition_columns, [add.get("partitionValues") or {} for add in applied.added]
            )
            if partitions is None:
                return None
            for path in applied.removed:
                files.pop(path, None)
                deleted_rows.pop(path, None)
            for add, values in zip(applied.added, partitions):
                path = add["path"]
                records = json.loads(add.get("stats") or "{}").get("numRecords")
                files[path] = self._data_file(path, add["size"], records, values, has_deletion_vector=False)
                deleted_rows.pop(path, None)
        return replace(base, version=version, files=files, deleted_rows=deleted_rows)

    def _read_between(self, v0: int, v1: int) -> bool:
        """Whether this instance holds every commit of ``(v0, v1]`` parsed."""
        return all(v in self._commits for v in range(v0 + 1, v1 + 1))

    def _last_shared(self, version: int) -> Optional[Snapshot]:
        """The snapshot of this location the process built or used last, when it is of an
        earlier version within :data:`APPLIED_COMMITS` and this log still holds its commit (a
        table re-created at the location writes other commits); else None."""
        key = _last_snapshots.get(self.location)
        if key is None or not version - APPLIED_COMMITS <= key[1] < version:
            return None
        base = _shared_snapshots.get(key)
        return base if base is not None and self._shared_key(key[1]) == key else None

    def _data_file(
        self,
        path: str,
        size: Any,
        records: Any,
        partition_values: Mapping[str, Any],
        has_deletion_vector: bool,
    ) -> DataFile:
        """A live file from what the log records of it (``deltalake``'s add actions or the
        commit's own): its path as recorded, size, row count (None without statistics)."""
        return DataFile(
            path=path,
            uri=self._file_uri(path),
            size_bytes=int(size),
            num_records=None if records is None else int(records),
            partition_values=dict(partition_values),
            has_deletion_vector=has_deletion_vector,
        )

    def _load_snapshot(self, version: int) -> Snapshot:
        table = self._replayed_to(version)
        try:
            if table is None:
                table = storage.delta_table(self.location, version=version)
        except (TableNotFoundError, DeltaError) as exc:
            # deltalake also says "not found" for a version whose log segment was cleaned up.
            if not self.exists():
                raise TableNotFound(f"No Delta table at {self.location}: {exc}") from exc
            raise HistoryUnavailable(
                f"Version {version} of {self.location} cannot be rebuilt from its log "
                f"(cleaned up or not committed yet): {exc}"
            ) from exc
        snapshot = self._build_snapshot(table, version)
        self._keep_replay_base(table, version)
        return snapshot

    def _replayed_to(self, version: int) -> Optional[DeltaTable]:
        """The table at ``version``, replayed from the newest version up to it loaded (or
        written, :meth:`written`) in this process, if its commit is still the one loaded (a
        table re-created at the location writes new commits); None when there is no such base
        or the replay fails."""
        base = _replay_bases.pop(self.location)
        if base is None:
            return None
        if base[0] > version:
            self._keep_replay_base(base[2], base[0], base[1])
            return None
        base_version, identity, table = base
        try:
            if self.commit_id(base_version) != identity:
                return None
            if base_version < version:
                table.load_as_version(version)
        except Exception:  # noqa: BLE001 - the shortcut only: the caller loads from the checkpoint
            return None
        return table

    def for_writing(self) -> DeltaTable:
        """The table at its latest version, for this process to write with deltalake: the one
        this process loaded there, when there is one (taken out of the cache while the writer
        moves it; hand it back with :meth:`written`), else opened from the log."""
        table = self._replayed_to(self.latest_version())
        return table if table is not None else storage.delta_table(self.location)

    def written(self, table: DeltaTable) -> None:
        """``table`` committed a version from this process: the next snapshot of that version
        starts from it instead of the log."""
        note_write()
        self._keep_replay_base(table, table.version())

    def _keep_replay_base(self, table: DeltaTable, version: int, identity: Optional[str] = None) -> None:
        """Keep ``table`` (at ``version``) as the location's base, unless a newer one is kept."""
        if identity is None:
            try:
                identity = self.commit_id(version)
            except HistoryUnavailable:
                return
        kept = _replay_bases.get(self.location)
        if kept is None or kept[0] <= version:
            _replay_bases.put(self.location, (version, identity, table))

    def _build_snapshot(self, table: DeltaTable, version: int) -> Snapshot:
        metadata, protocol = table.metadata(), table.protocol()
        actions = pa.table(table.get_add_actions(flatten=False))
        columns = set(actions.column_names)
        paths = actions.column("path").to_pylist()
        sizes = actions.column("size_bytes").to_pylist()
        records = (
            actions.column("num_records").to_pylist() if "num_records" in columns else [None] * len(paths)
        )
        partitions = actions.column("partition").to_pylist() if "partition" in columns else [{}] * len(paths)
        masks = self._deletion_vectors(table)
        files: Dict[str, DataFile] = {}
        deleted_rows = {}
        for path, size, count, values in zip(paths, sizes, records, partitions):
            deleted = masks.get(urllib.parse.unquote(self._file_uri(path)))
            if deleted is not None:
                deleted_rows[path] = deleted
            files[path] = self._data_file(path, size, count, values or {}, deleted is not None)
        return Snapshot(
            version=version,
            table_id=str(metadata.id),
            schema_json=table.schema().to_json(),
            partition_columns=tuple(metadata.partition_columns),
            configuration=dict(metadata.configuration),
            files=files,
            deleted_rows=deleted_rows,
            description=metadata.description or None,
            writer_features=tuple(protocol.writer_features or ()),
            min_writer_version=protocol.min_writer_version,
            min_reader_version=protocol.min_reader_version,
            reader_features=tuple(protocol.reader_features or ()),
        )

    @staticmethod
    def _deletion_vectors(table: DeltaTable) -> Dict[str, "np.ndarray[Any, Any]"]:
        """Per decoded URI of a file carrying a deletion vector, the positions of the rows it
        masks. ``get_add_actions`` does not say, and only tables with the deletionVectors reader
        feature can have any, so only those pay for reading the vectors."""
        if "deletionVectors" not in (table.protocol().reader_features or []):
            return {}
        vectors = pa.table(table.deletion_vectors().read_all())
        return {
            urllib.parse.unquote(uri): np.flatnonzero(~np.asarray(keep, dtype=bool))
            for uri, keep in zip(
                vectors.column("filepath").to_pylist(), vectors.column("selection_vector").to_pylist()
            )
        }

    def _file_uri(self, log_path: str) -> str:
        """Log paths are URI-encoded and relative to the root unless they carry a scheme."""
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", log_path):
            return log_path
        return f"{self.root_uri}/{log_path}"

    def schema_at(self, version: int) -> StructType:
        return self.snapshot(version).schema

    def columns_changed(self, v0: int, v1: int) -> Optional[str]:
        """How the table's columns changed from ``v0`` to ``v1``, in words (:func:`schema_change`;
        comments are no change); None when they did not, or ``v0`` can no longer be read."""
        try:
            before = without_comments(json.loads(self.snapshot(v0).schema_json))
        except DeltaLogError:
            return None
        after = without_comments(json.loads(self.snapshot(v1).schema_json))
        return schema_change(before, after) if after != before else None

    def table_id(self, version: int) -> str:
        """The table's id in its metadata; it changes when the table is re-created."""
        return self.snapshot(version).table_id

    @property
    def partition_columns(self) -> Tuple[str, ...]:
        """Partition columns of the latest version."""
        return self.snapshot(self.latest_version()).partition_columns

    def row_count(self, version: int) -> Optional[int]:
        """The table's rows at ``version`` from the files' statistics (no scan); None when a
        writer recorded none."""
        return _total_rows(tuple(self.snapshot(version).files.values()))

    def size_bytes(self, version: int) -> int:
        """The size of the table's live data files at ``version``."""
        return sum(f.size_bytes for f in self.snapshot(version).files.values())

    def num_records(self, version: int) -> Optional[int]:
        """The rows of the table's live data files at ``version`` by their statistics; None when
        a file has none."""
        return _total_rows(self.files_at(version))

    def files_at(self, version: int) -> Tuple[DataFile, ...]:
        return tuple(self.snapshot(version).files.values())

    # -- commits ----------------------------------------------------------------------------------

    def _read_commit(self, version: int) -> _Commit:
        cached = self._commits.get(version)
        if cached is not None:
            return cached
        raw = self._commit_bytes(version)
        text = raw.decode("utf-8")
        identity = fingerprint(raw)
        commit = _Commit(
            version=version, identity=identity, commit_info={}, metadata=None, changes_data=False
        )
        added: List[Mapping[str, Any]] = []
        removed: List[str] = []
        file_only = True
        try:
            # One parse per commit, not one per action: a long run of small commits is parsed
            # whole by an interval (docs/ARCHITECTURE.md, "Reading sources").
            actions = json.loads("[" + ",".join(line for line in text.splitlines() if line.strip()) + "]")
        except ValueError as exc:
            raise CommitUnreadable(
                f"{self.location}: the commit of version {version} is not valid JSON (truncated or "
                f"corrupt: {exc})."
            ) from exc
        for action in actions:
            file_only = file_only and FILE_ONLY_ACTIONS.issuperset(action)
            if "commitInfo" in action:
                commit.commit_info = action["commitInfo"] or {}
            elif "metaData" in action:
                commit.metadata = action["metaData"]
            for kind in ("add", "remove"):
                file_action = action.get(kind)
                if file_action is None:
                    continue
                # The protocol defaults dataChange to true where a writer leaves it out.
                commit.touches_files = True
                commit.changes_data |= bool(file_action.get("dataChange", True))
                if file_action.get("deletionVector"):
                    commit.deletion_vector_paths.append(file_action["path"])
                if kind == "add":
                    added.append(file_action)
                else:
                    removed.append(file_action["path"])
                    commit.removes_files |= bool(file_action.get("dataChange", True))
        if file_only and not commit.deletion_vector_paths:
            commit.file_actions = _FileActions(tuple(added), tuple(removed))
        self._commits[version] = commit
        return commit

    def _commit_bytes(self, version: int) -> bytes:
        if self._remote:
            raw = self._raw.get(version)
            if raw is None:
                raw = self._raw[version] = self._read_bytes(version)
            return raw
        return self._read_bytes(version)

    def _read_bytes(self, version: int) -> bytes:
        if self._remote:
            # One request (Arrow's input stream asks for the object's size first).
            found = self._storage.read(f"{self.location}/{commit_file(version)}")
            if found is None:
                raise HistoryUnavailable(f"{self.location}: the commit of version {version} is gone.")
            return found
        path = f"{self._root}/{commit_file(version)}"
        try:
            if isinstance(self._fs, pafs.LocalFileSystem):  # a quarter of Arrow's stream's cost
                with open(path, "rb") as local:
                    return local.read()
            with self._fs.open_input_stream(path) as stream:
                return bytes(stream.read())
        except FileNotFoundError as exc:
            raise HistoryUnavailable(f"{self.location}: the commit of version {version} is gone.") from exc

    def commit_id(self, version: int) -> str:
        """The identity of ``version``'s commit (see :attr:`_Commit.identity`);
        :class:`HistoryUnavailable` if its commit file is gone. A digest of its bytes: nothing
        is parsed."""
        parsed = self._commits.get(version)
        if parsed is not None:
            return parsed.identity
        if version not in self._commit_ids:
            self._commit_ids[version] = self._object_commit_id(version) or fingerprint(
                self._commit_bytes(version)
            )
        return self._commit_ids[version]

    def _object_commit_id(self, version: int) -> Optional[str]:
        """An object store's commit identity as this process read it before, while the listing
        shows the same object (by its tag); None where there is none to go by. The commit is
        read (and its identity kept) otherwise."""
        if not self._remote:
            return None
        tag = self._listing().tags.get(version)
        if not tag:
            return None
        key = (self.location, version, tag)
        known = _object_commit_ids.get(key)
        if known is None:
            known = fingerprint(self._commit_bytes(version))
            _object_commit_ids.put(key, known)
        return known

    def operation_metrics(self, version: int) -> Dict[str, int]:
        """The row and file counts the writer of ``version`` recorded (:attr:`_Commit.metrics`)."""
        return self._read_commit(version).metrics

    def rows_added_and_removed(self, version: int) -> Optional[Tuple[int, int]]:
        """The rows ``version``'s commit added and removed (:attr:`_Commit.rows_added_and_removed`)."""
        return self._read_commit(version).rows_added_and_removed

    def lost_commit(self, version: int, commit: str) -> Optional[str]:
        """Why this log no longer holds ``commit`` at ``version`` (None when it does): the table
        was re-created or rewritten, its log ends before that version, or the entry is gone."""
        if not commit:
            return f"version {version} was consumed before commit identities were recorded"
        latest = self.latest_version()
        if version > latest:
            return (
                f"its log ends at version {latest}, before the consumed version {version} "
                "(re-created, or its log lost commits)"
            )
        try:
            found = self.commit_id(version)
        except HistoryUnavailable:
            return f"the log entry of the consumed version {version} is gone (cleaned up)"
        if found != commit:
            return f"its version {version} is not the commit consumed (the table was re-created or rewritten)"
        return None

    def data_change_after(self, version: int) -> Optional[str]:
        """The first commit after ``version`` that changed the table's rows, described; None if
        none did (compaction commits rewrite files, not rows)."""
        try:
            changed = self.first_data_change_after(version)
        except HistoryUnavailable as exc:
            return str(exc)
        if changed is None:
            return None
        return f"version {changed} ({self._read_commit(changed).operation or 'a write'})"

    def first_data_change_after(self, version: int) -> Optional[int]:
        """The first version after ``version`` whose commit changed rows; None if none did.
        :class:`HistoryUnavailable` if a commit between is gone."""
        for commit in self._commits_between(version, self.latest_version()):
            if commit.changes_data:
                return commit.version
        return None

    def commit_info(self, version: int) -> Mapping[str, Any]:
        """The ``commitInfo`` action its writer recorded in ``version``'s commit."""
        return self._read_commit(version).commit_info

    def _commits_between(self, v0: int, v1: int) -> Iterator[_Commit]:
        for version in range(v0 + 1, v1 + 1):
            yield self._read_commit(version)

    # -- intervals --------------------------------------------------------------------------------

    def interval(self, v0: int, v1: int, *, table_id: Optional[str] = None) -> Interval:
        """The change over ``(v0, v1]``.

        ``table_id`` is the id recorded when ``v0`` was consumed; passing it detects a table
        dropped and re-created at the same location, which the log itself cannot show. ``v0 ==
        v1`` answers without any I/O, which is the NO_DATA fast path, and so skips that check.
        """
        if v0 < 0 or v1 < 0:
            raise ValueError(f"Versions are not negative, got ({v0}, {v1}].")
        if v0 == v1:
            return Interval(v0, v1)
        try:
            key = (self.location, v0, self.commit_id(v0), v1, self.commit_id(v1), table_id)
        except HistoryUnavailable:
            return self._interval(v0, v1, table_id)
        shared = _shared_intervals.get(key)
        if shared is None:
            shared = self._interval(v0, v1, table_id)
            _shared_intervals.put(key, shared)
        elif shared.differentiable:
            # Its files were there when it was read; a VACUUM may have removed some since.
            missing = self._file_reason(shared.added, shared.removed + shared.masked)
            return replace(shared, undifferentiable_reason=missing) if missing else shared
        return shared

    def _interval(self, v0: int, v1: int, table_id: Optional[str]) -> Interval:
        latest = self.latest_version()
        if v1 > latest:
            raise ValueError(f"{self.location} has no version {v1} yet (latest is {latest}).")
        if v1 < v0:
            # Versions never go back (RESTORE commits a new one): the log was started anew.
            return Interval(
                v0,
                v1,
                undifferentiable_reason=(
                    f"table was re-created: version {v0} was consumed but the log now ends at {latest}"
                ),
            )
        try:
            before = self.snapshot(v0)
            commits = list(self._commits_between(v0, v1))
        except HistoryUnavailable as exc:
            return Interval(v0, v1, undifferentiable_reason=f"log entries are no longer present: {exc}")
        if table_id is not None and before.table_id != table_id:
            return Interval(
                v0,
                v1,
                undifferentiable_reason=(
                    f"table was re-created: its id is now {before.table_id}, the consumed version "
                    f"belonged to {table_id}"
                ),
            )
        reason = self._metadata_reason(before, commits) or self._restore_reason(commits)
        if reason is None and not any(c.changes_data for c in commits):
            # Only compaction-like commits (dataChange=false): rewritten files, same rows.
            return Interval(v0, v1, changed_rows=0)
        try:
            after = self.snapshot(v1)
        except HistoryUnavailable as exc:
            return Interval(v0, v1, undifferentiable_reason=f"log entries are no longer present: {exc}")
        # A deletion vector re-adds a file under its path with more rows masked, which the
        # path-keyed difference below sees as unchanged: those files are read for the rows
        # their vector newly masks (docs/ARCHITECTURE.md, "Reading sources").
        vectored = {p for c in commits for p in c.deletion_vector_paths}
        compactions = [c.version for c in commits if c.rearranges]
        added, removed = self._changed_files(before, after, compactions, vectored)
        masked = tuple(after.files[p] for p in sorted(vectored) if p in before.files and p in after.files)
        unread = [f.path for f in masked if f.path not in after.deleted_rows]
        if unread and reason is None:
            reason = f"the deletion vector of {unread[0]} at version {v1} cannot be read"
        reason = reason or self._file_reason(added, removed + masked)
        changed = _known_sum(c.changed_rows for c in commits)
        newly = sum(_newly_masked(before, after, f.path) for f in masked)
        return Interval(v0, v1, added, removed, reason, masked, changed, newly)

    def _changed_files(
        self, before: Snapshot, after: Snapshot, compactions: List[int], vectored: Set[str]
    ) -> Tuple[Tuple[DataFile, ...], Tuple[DataFile, ...]]:
        """The files whose rows count +1 and -1: those live at ``after`` and not ``before`` and
        the reverse, less each compaction's rewrite (docs/ARCHITECTURE.md, "Reading sources").
        A compaction's removed files hold exactly the rows of its added ones, so undoing it
        leaves the interval's rows unchanged: its added files count -1 and its removed ones +1,
        and the files it compacted that were live before, and the compacted files still live
        after, cancel rather than being read twice. A compaction stays in the difference where
        deletion vectors are involved (it purges the rows the vectors of its files mask, or a
        vector of the interval masks rows of a file it wrote: ``vectored``), or where its
        earlier version is gone."""
        signs: Dict[str, int] = {}
        files: Dict[str, DataFile] = {}

        def count(side: Mapping[str, DataFile], sign: int, unless_in: Mapping[str, DataFile]) -> None:
            for path, data_file in side.items():
                if path not in unless_in:
                    signs[path] = signs.get(path, 0) + sign
                    files.setdefault(path, data_file)

        count(after.files, +1, before.files)
        count(before.files, -1, after.files)
        for version in compactions:
            try:
                prior, compacted = self.snapshot(version - 1), self.snapshot(version)
            except HistoryUnavailable:
                continue
            rewritten = [f for p, f in prior.files.items() if p not in compacted.files]
            written = {p: f for p, f in compacted.files.items() if p not in prior.files}
            if any(f.has_deletion_vector for f in rewritten) or vectored.intersection(written):
                continue
            count(written, -1, {})
            count({f.path: f for f in rewritten}, +1, {})
        added = tuple(files[p] for p, sign in sorted(signs.items()) if sign > 0)
        removed = tuple(files[p] for p, sign in sorted(signs.items()) if sign < 0)
        return added, removed

    @staticmethod
    def _metadata_reason(before: Snapshot, commits: List[_Commit]) -> Optional[str]:
        """Why metadata changes inside the interval rule out a file-set difference."""
        if before.column_mapping_mode != "none":
            return (
                f"column mapping (mode {before.column_mapping_mode}) stores physical column "
                "names in the data files, which file-set change extraction does not translate"
            )
        schema = without_comments(json.loads(before.schema_json))
        table_id = before.table_id
        for commit in commits:
            meta = commit.metadata
            if meta is None:
                continue
            if meta.get("id") != table_id and commit.operation.upper() not in REPLACE_OPERATIONS:
                return f"table was re-created at version {commit.version} (table id changed)"
            # A REPLACE continues the table's log (delta-spark gives it a new id): its commit
            # removes every file and adds the new ones, a file-set change like an overwrite's.
            table_id = meta.get("id") or table_id
            changed = without_comments(json.loads(meta.get("schemaString") or "{}"))
            if changed != schema:
                return f"schema changed at version {commit.version} ({schema_change(schema, changed)})"
            if tuple(meta.get("partitionColumns") or ()) != before.partition_columns:
                return f"partitioning changed at version {commit.version}"
            mode = ((meta.get("configuration") or {}).get(COLUMN_MAPPING_MODE) or "none").lower()
            if mode != "none":
                return f"column mapping was enabled at version {commit.version}"
        return None

    @staticmethod
    def _restore_reason(commits: List[_Commit]) -> Optional[str]:
        """A RESTORE takes the table back to an older version: whatever consumed the versions in
        between recomputes rather than trusting a file-set difference across it."""
        for commit in commits:
            if commit.operation.upper() == "RESTORE":
                target = (commit.commit_info.get("operationParameters") or {}).get("version")
                to = f" to version {target}" if target is not None else ""
                return f"restored{to} at version {commit.version}"
        return None

    def _file_reason(self, added: Tuple[DataFile, ...], removed: Tuple[DataFile, ...]) -> Optional[str]:
        """Why the interval's files cannot be read."""
        missing = self._missing_files(added + removed)
        if missing:
            return (
                f"{len(missing)} data file(s) of the interval are no longer present (vacuumed?), "
                f"e.g. {missing[0].path}"
            )
        return None

    def _missing_files(self, files: Tuple[DataFile, ...]) -> List[DataFile]:
        """Files whose data is gone; one batched metadata call per file system."""
        by_fs: Dict[int, Tuple[pafs.FileSystem, List[Tuple[str, DataFile]]]] = {}
        for data_file in files:
            fs, path = self.file_path(data_file)
            by_fs.setdefault(id(fs), (fs, []))[1].append((path, data_file))
        missing: List[DataFile] = []
        for fs, entries in by_fs.values():
            infos = fs.get_file_info([path for path, _ in entries])
            missing.extend(f for info, (_, f) in zip(infos, entries) if info.type == pafs.FileType.NotFound)
        return missing

    @property
    def root(self) -> Tuple[pafs.FileSystem, str]:
        """The file system holding the table and the table's folder there."""
        return self._fs, self._root

    def file_path(self, data_file: DataFile) -> Tuple[pafs.FileSystem, str]:
        """The file system holding ``data_file`` and its path there."""
        if data_file.uri.startswith(self.root_uri + "/"):
            relative = urllib.parse.unquote(data_file.uri[len(self.root_uri) + 1 :])
            return self._fs, f"{self._root}/{relative}"
        return storage.arrow(data_file.uri)

    def change_data_feed_covers(self, v0: int, v1: int) -> bool:
        """Whether ``delta.enableChangeDataFeed`` was on for every commit of ``(v0, v1]``, so the
        engine's change data feed can serve the interval."""
        try:
            enabled = _is_true(self.snapshot(v0).configuration.get(CHANGE_DATA_FEED))
            for commit in self._commits_between(v0, v1):
                if commit.metadata is not None:
                    enabled = enabled and _is_true(
                        (commit.metadata.get("configuration") or {}).get(CHANGE_DATA_FEED)
                    )
        except HistoryUnavailable:
            return False
        return enabled


def without_comments(schema: Any) -> Any:
    """A Delta schema (JSON) without its columns' comments: documentation (``persist_docs``)
    changes no row, so a comment changed on a source is no schema change.

    >>> without_comments({"fields": [{"name": "a", "metadata": {"comment": "x", "k": 1}}]})
    {'fields': [{'name': 'a', 'metadata': {'k': 1}}]}
    """
    if isinstance(schema, list):
        return [without_comments(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    kept = {key: without_comments(value) for key, value in schema.items()}
    if isinstance(kept.get("metadata"), dict):
        kept["metadata"] = {k: v for k, v in kept["metadata"].items() if k != "comment"}
    return kept


def typed_partition_values(
    schema: StructType, columns: Tuple[str, ...], serialized: List[Mapping[str, Optional[str]]]
) -> Optional[List[Dict[str, Any]]]:
    """The partition values of files as ``deltalake`` types them, from the strings their ``add``
    actions record (``serialized``, one mapping per file; Delta's partition value serialization:
    ``2026-01-31``, ``true``, ``12.50``). None when a column's type is not one of
    :data:`APPLIED_PARTITION_TYPES`, or a value is empty (which the protocol reads as null,
    where a writer may not have meant it) or does not parse: the caller loads with ``deltalake``.

    >>> from pyspark.sql.types import StructField
    >>> schema = StructType([StructField("day", DateType()), StructField("n", IntegerType())])
    >>> typed_partition_values(schema, ("day", "n"), [{"day": "2026-01-31", "n": None}])
    [{'day': datetime.date(2026, 1, 31), 'n': None}]
    >>> typed_partition_values(schema, ("n",), [{"n": "1.5"}]) is None
    True
    """
    if not columns:
        return [{} for _ in serialized]
    types = {f.name: f.dataType for f in schema.fields}
    typed: Dict[str, List[Any]] = {}
    for column in columns:
        data_type = types.get(column)
        strings = [values.get(column) for values in serialized]
        if not isinstance(data_type, APPLIED_PARTITION_TYPES) or "" in strings:
            return None
        try:
            typed[column] = pa.array(strings, pa.string()).cast(to_arrow_type(data_type)).to_pylist()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
    return [{column: typed[column][i] for column in columns} for i in range(len(serialized))]


def schema_change(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """What changed between two Delta schemas (JSON), column by column, in words.

    >>> a = {"fields": [{"name": "id", "type": "long"}, {"name": "v", "type": "string"}]}
    >>> b = {"fields": [{"name": "id", "type": "integer"}, {"name": "w", "type": "string"}]}
    >>> schema_change(a, b)
    'added w; dropped v; id is now integer, was long'
    """
    old = {f["name"]: f for f in before.get("fields") or []}
    new = {f["name"]: f for f in after.get("fields") or []}
    parts = [f"added {name}" for name in new if name not in old]
    parts += [f"dropped {name}" for name in old if name not in new]
    for name in [n for n in new if n in old and new[n] != old[n]]:
        if new[name].get("type") != old[name].get("type"):
            parts.append(
                f"{name} is now {_type_text(new[name]['type'])}, was {_type_text(old[name]['type'])}"
            )
        else:
            parts.append(f"{name} changed nullability or metadata")
    return "; ".join(parts) or "column order or table metadata"


def _type_text(delta_type: Any) -> str:
    return delta_type if isinstance(delta_type, str) else str(delta_type.get("type", delta_type))


def _is_true(value: Optional[str]) -> bool:
    return (value or "").strip().lower() == "true"
