"""A table's change over an interval of versions ``(v0, v1]``: the difference of the two
snapshots' file sets (files in both cancel) less what its compaction commits rewrote, checked
against the interval's own commits for what makes a file-set difference wrong: deletion vectors,
schema or table-id changes, cleaned-up log entries, vacuumed files (docs/ARCHITECTURE.md,
"Reading sources")."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Dict, List, Mapping, Optional, Set, Tuple

import numpy as np

from dbt.adapters.dyntable.delta_log.commits import Commit, Commits
from dbt.adapters.dyntable.delta_log.current_listing import CurrentListing
from dbt.adapters.dyntable.delta_log.deletion_vectors import DeletionVectorUnreadable
from dbt.adapters.dyntable.delta_log.errors import DeltaLogError, HistoryUnavailable
from dbt.adapters.dyntable.delta_log.lru import Lru
from dbt.adapters.dyntable.delta_log.model import DataFile, Interval, Positions, Snapshot, known_sum
from dbt.adapters.dyntable.delta_log.protocol import CHANGE_DATA_FEED, COLUMN_MAPPING_MODE
from dbt.adapters.dyntable.delta_log.schema import schema_change, without_comments
from dbt.adapters.dyntable.delta_log.snapshots import SHARED_SNAPSHOT_CACHE_SIZE, Snapshots
from dbt.adapters.dyntable.delta_log.table_files import TableFiles

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
#: An interval's ends as the process names them (:meth:`Intervals.identity`).
IntervalIdentity = Tuple[str, int, str, int, str]
#: Intervals read by the process, keyed by location and both ends' versions and commits: the DTs
#: of one run over the same source read its same interval, which after a run of ten thousand
#: small commits is that many commit files to parse (docs/ARCHITECTURE.md, "Reading sources").
_shared_intervals: "Lru[Tuple[str, int, str, int, str, Optional[str]], Interval]" = Lru(
    SHARED_SNAPSHOT_CACHE_SIZE
)


class Intervals:
    """The intervals of one table, as one reader reads them: from its snapshots and commits, or
    as the process read them before."""

    def __init__(
        self, files: TableFiles, listing: CurrentListing, commits: Commits, snapshots: Snapshots
    ) -> None:
        self._files = files
        self._listing = listing
        self._commits = commits
        self._snapshots = snapshots

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
        identity = self.identity(v0, v1)
        if identity is None:
            return self._interval(v0, v1, table_id)
        key = (*identity, table_id)
        shared = _shared_intervals.get(key)
        if shared is None:
            shared = self._interval(v0, v1, table_id)
            _shared_intervals.put(key, shared)
        elif shared.differentiable:
            # Its files were there when it was read; a VACUUM may have removed some since.
            missing = self._file_reason(shared.added, shared.removed + shared.masked)
            return replace(shared, undifferentiable_reason=missing) if missing else shared
        return shared

    def identity(self, v0: int, v1: int) -> Optional[IntervalIdentity]:
        """What names the change over ``(v0, v1]`` in the process: the table's location and both
        ends' versions and commits (a table re-created at the same location writes new commits);
        None where a commit's log entry is gone."""
        try:
            return (self._files.location, v0, self._commits.commit_id(v0), v1, self._commits.commit_id(v1))
        except HistoryUnavailable:
            return None

    def _interval(self, v0: int, v1: int, table_id: Optional[str]) -> Interval:
        latest = self._listing.latest_version()
        if v1 > latest:
            raise ValueError(f"{self._files.location} has no version {v1} yet (latest is {latest}).")
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
            before = self._snapshots.get(v0)
            commits = list(self._commits.between(v0, v1))
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
        reason = _metadata_reason(before, commits) or _restore_reason(commits)
        if reason is None and not any(c.changes_data for c in commits):
            # Only compaction-like commits (dataChange=false): rewritten files, same rows.
            return Interval(v0, v1, changed_rows=0)
        try:
            after = self._snapshots.get(v1)
        except HistoryUnavailable as exc:
            return Interval(v0, v1, undifferentiable_reason=f"log entries are no longer present: {exc}")
        # A deletion vector re-adds a file under its path with more rows masked, which the
        # path-keyed difference below sees as unchanged: those files are read for the rows
        # their vector newly masks (docs/ARCHITECTURE.md, "Reading sources").
        vectored = {p for c in commits for p in c.deletion_vector_paths}
        compactions = [c for c in commits if c.rearranges]
        added, removed = self._changed_files(before, after, compactions, vectored)
        masked = tuple(after.files[p] for p in sorted(vectored) if p in before.files and p in after.files)
        newly = {}
        for data_file in masked:
            try:
                newly[data_file.path] = self._newly_masked(commits, data_file.path)
            except DeletionVectorUnreadable as exc:
                reason = (
                    reason or f"the deletion vector of {data_file.path} by version {v1} cannot be read: {exc}"
                )
        reason = reason or self._file_reason(added, removed + masked)
        changed = known_sum(c.changed_rows for c in commits)
        return Interval(v0, v1, added, removed, reason, masked, changed, newly)

    def _newly_masked(self, commits: List[Commit], path: str) -> Positions:
        """The positions of the rows of ``path`` (live at both ends of ``commits``) that its
        deletion vector masks after them and did not before: the vector its first remove names
        (the file as it was) against the one its last add carries. Read from those vectors alone,
        not from the snapshots' (docs/ARCHITECTURE.md, "Reading sources")."""
        removes = [c.removed_vectors[path] for c in commits if path in c.removed_vectors]
        if not removes:
            # A writer must remove the file as it was to add it with another vector.
            raise DeletionVectorUnreadable("its vector changed without a remove naming the one before")
        before = removes[0]
        after = next((c.added_vectors[path] for c in reversed(commits) if path in c.added_vectors), None)
        masked = self._files.masked_rows(after) if after else np.empty(0, np.int64)
        return np.setdiff1d(masked, self._files.masked_rows(before)) if before else masked

    def _changed_files(
        self, before: Snapshot, after: Snapshot, compactions: List[Commit], vectored: Set[str]
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
        for compaction in compactions:
            try:
                prior, compacted = (
                    self._snapshots.get(compaction.version - 1),
                    self._snapshots.get(compaction.version),
                )
            except HistoryUnavailable:
                continue
            rewritten = [f for p, f in prior.files.items() if p not in compacted.files]
            written = {p: f for p, f in compacted.files.items() if p not in prior.files}
            # Its removes name the vectors of the files it rewrote.
            purges = any(compaction.removed_vectors.get(f.path) for f in rewritten)
            if purges or vectored.intersection(written):
                continue
            count(written, -1, {})
            count({f.path: f for f in rewritten}, +1, {})
        added = tuple(files[p] for p, sign in sorted(signs.items()) if sign > 0)
        removed = tuple(files[p] for p, sign in sorted(signs.items()) if sign < 0)
        return added, removed

    def _file_reason(self, added: Tuple[DataFile, ...], removed: Tuple[DataFile, ...]) -> Optional[str]:
        """Why the interval's files cannot be read."""
        missing = self._files.missing_files(added + removed)
        if missing:
            return (
                f"{len(missing)} data file(s) of the interval are no longer present (vacuumed?), "
                f"e.g. {missing[0].path}"
            )
        return None

    def columns_changed(self, v0: int, v1: int) -> Optional[str]:
        """How the table's columns changed from ``v0`` to ``v1``, in words (:func:`schema_change`;
        comments are no change); None when they did not, or ``v0`` can no longer be read."""
        try:
            before = without_comments(json.loads(self._snapshots.get(v0).schema_json))
        except DeltaLogError:
            return None
        after = without_comments(json.loads(self._snapshots.get(v1).schema_json))
        return schema_change(before, after) if after != before else None

    def change_data_feed_covers(self, v0: int, v1: int) -> bool:
        """Whether ``delta.enableChangeDataFeed`` was on for every commit of ``(v0, v1]``, so the
        engine's change data feed can serve the interval."""
        try:
            enabled = _is_true(self._snapshots.get(v0).configuration.get(CHANGE_DATA_FEED))
            for commit in self._commits.between(v0, v1):
                if commit.metadata is not None:
                    enabled = enabled and _is_true(
                        (commit.metadata.get("configuration") or {}).get(CHANGE_DATA_FEED)
                    )
        except HistoryUnavailable:
            return False
        return enabled


def _metadata_reason(before: Snapshot, commits: List[Commit]) -> Optional[str]:
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


def _restore_reason(commits: List[Commit]) -> Optional[str]:
    """A RESTORE takes the table back to an older version: whatever consumed the versions in
    between recomputes rather than trusting a file-set difference across it."""
    for commit in commits:
        if commit.operation.upper() == "RESTORE":
            target = (commit.commit_info.get("operationParameters") or {}).get("version")
            to = f" to version {target}" if target is not None else ""
            return f"restored{to} at version {commit.version}"
    return None


def _is_true(value: Optional[str]) -> bool:
    return (value or "").strip().lower() == "true"
