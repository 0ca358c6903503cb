"""A table's snapshots by version: kept per reader and shared across the process, built forward
from an earlier one over commits that only add and remove files, else loaded by ``deltalake``
(docs/ARCHITECTURE.md, "Reading sources")."""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from typing import Callable, Dict, Optional, Tuple

from dbt.adapters.dyntable.delta_log.commits import Commits
from dbt.adapters.dyntable.delta_log.deltalake_snapshots import DeltalakeSnapshots
from dbt.adapters.dyntable.delta_log.errors import HistoryUnavailable
from dbt.adapters.dyntable.delta_log.lru import Lru
from dbt.adapters.dyntable.delta_log.model import DeletedRows, Positions, Snapshot
from dbt.adapters.dyntable.delta_log.schema import typed_partition_values
from dbt.adapters.dyntable.delta_log.table_files import TableFiles
from dbt.adapters.dyntable.delta_log.value_ranges import bounded_columns, from_stats

#: Snapshots are immutable per version; a refresh touches two or three of them per source.
SNAPSHOT_CACHE_SIZE = 8
#: Snapshots shared by every instance in the process, keyed by location, version and the digest of
#: that version's commit (a table re-created at the same location writes new commits). The DTs of
#: one `dbt run` read the same source versions, and a runner's next tick reads as its start the
#: version the last one ended at: each is loaded once (docs/ARCHITECTURE.md, "Reading sources").
SHARED_SNAPSHOT_CACHE_SIZE = 64
#: Commits a snapshot is built forward over from an earlier one this process holds, when they only
#: add and remove files (``Snapshots._applied``), before ``deltalake`` replays them instead.
APPLIED_COMMITS = 64
#: Locations whose newest snapshots this process keeps: per location, the version and commit
#: identity of the snapshot it built or used last, the base ``Snapshots._applied`` builds on when
#: the instance asking holds none (each refresh opens its DT's log afresh, and asks it for the
#: version its own commit made).
LAST_SNAPSHOT_CACHE_SIZE = 256
_shared_snapshots: "Lru[Tuple[str, int, str], Snapshot]" = Lru(SHARED_SNAPSHOT_CACHE_SIZE)
_last_snapshots: "Lru[str, Tuple[str, int, str]]" = Lru(LAST_SNAPSHOT_CACHE_SIZE)


class Snapshots:
    """One table's snapshots as one reader asks for them, by version. A table re-created at its
    location reuses version numbers: :meth:`forget`; the shared ones are keyed by their commit's
    identity, which re-creation changes."""

    def __init__(self, files: TableFiles, commits: Commits, deltalake: DeltalakeSnapshots) -> None:
        self._files = files
        self._commits = commits
        self._deltalake = deltalake
        self._held: "Lru[int, Snapshot]" = Lru(SNAPSHOT_CACHE_SIZE)

    def forget(self) -> None:
        """Drop the snapshots held by version: the table was re-created, its versions are others."""
        self._held = Lru(SNAPSHOT_CACHE_SIZE)

    def get(self, version: int) -> Snapshot:
        """The table at ``version`` (cached); :class:`HistoryUnavailable` if it cannot be rebuilt."""
        cached = self._held.get(version)
        if cached is not None:
            return cached
        key = self._shared_key(version)
        shared = _shared_snapshots.get(key) if key is not None else None
        snapshot = shared or self._applied(version) or self._deltalake.load(version)
        if key is not None:
            if shared is None:
                _shared_snapshots.put(key, snapshot)
            _last_snapshots.put(self._files.location, key)
        self._held.put(version, snapshot)
        return snapshot

    def _shared_key(self, version: int) -> Optional[Tuple[str, int, str]]:
        """The process-wide cache key of ``version``; None when its commit file is gone (a
        checkpoint may still rebuild it, uncached)."""
        try:
            return self._files.location, version, self._commits.read(version).identity
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
            for v in self._held
            if v < version and (version - APPLIED_COMMITS <= v or self._commits.all_read(v, version))
        ]
        base = self._held.get(max(held)) if held else self._last_shared(version)
        if base is None or (base.partition_columns and base.column_mapping_mode != "none"):
            # Under column mapping, partition values are keyed by physical column names.
            return None
        try:
            commits = [self._commits.read(v) for v in range(base.version + 1, version + 1)]
        except HistoryUnavailable:
            return None
        files = dict(base.files)
        # Per path the commits added: the vector it was added with, or None for none.
        vectors: Dict[str, Optional[Callable[[], Positions]]] = {}
        schema = base.schema
        bounded = bounded_columns(base.schema_json, base.column_mapping_mode)
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
            for add, values in zip(applied.added, partitions):
                path = add["path"]
                stats = json.loads(add.get("stats") or "{}")
                records = stats.get("numRecords")
                ranges = from_stats(
                    stats.get("minValues"), stats.get("maxValues"), stats.get("nullCount"), records, bounded
                )
                files[path] = self._files.data_file(path, add["size"], records, values, ranges)
                vector = commit.added_vectors[path]
                vectors[path] = None if vector is None else functools.partial(self._files.masked_rows, vector)
        earlier = base.deleted_rows
        if not isinstance(earlier, DeletedRows) and not earlier and not any(vectors.values()):
            # No vector before nor now (a table without the feature): nothing to track.
            return replace(base, version=version, files=files, deleted_rows={})
        deleted_rows = (earlier if isinstance(earlier, DeletedRows) else DeletedRows(rest=earlier)).updated(
            vectors, files
        )
        return replace(base, version=version, files=files, deleted_rows=deleted_rows)

    def _last_shared(self, version: int) -> Optional[Snapshot]:
        """The snapshot of this location the process built or used last, when it is of an
        earlier version within :data:`APPLIED_COMMITS` and this log still holds its commit (a
        table re-created at the location writes other commits); else None."""
        key = _last_snapshots.get(self._files.location)
        if key is None or not version - APPLIED_COMMITS <= key[1] < version:
            return None
        base = _shared_snapshots.get(key)
        return base if base is not None and self._shared_key(key[1]) == key else None
