"""One table's transaction log, as the rest of the package asks it: :class:`DeltaLog`, composed of
the readers of this package, each of one part of the log."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple, Union

import pyarrow.fs as pafs
from deltalake import DeltaTable
from pyspark.sql.types import StructType

from dbt.adapters.dyntable.delta_log.commits import Commits
from dbt.adapters.dyntable.delta_log.current_listing import CurrentListing
from dbt.adapters.dyntable.delta_log.deltalake_snapshots import DeltalakeSnapshots
from dbt.adapters.dyntable.delta_log.intervals import IntervalIdentity, Intervals
from dbt.adapters.dyntable.delta_log.model import DataFile, Interval, Snapshot, total_rows
from dbt.adapters.dyntable.delta_log.snapshots import Snapshots
from dbt.adapters.dyntable.delta_log.table_files import TableFiles
from dbt.adapters.dyntable.delta_log.timeline import Timeline


class DeltaLog:
    """Read-only view of one Delta table's transaction log.

    Cheap to create. Snapshots and parsed commits are cached per instance, by version: a table
    dropped and re-created at the same location reuses version numbers, so the instance forgets
    them when a listing shows the latest commit it had listed written anew
    (:meth:`CurrentListing.get`). Keep an instance for one refresh rather than for the life of a
    process. Snapshots are also shared across instances, keyed by their commit's fingerprint,
    which re-creation changes.
    """

    def __init__(self, location: Union[str, Path], since: Optional[int] = None) -> None:
        """``since``: the version the caller will ask about first (a source's consumed version),
        where an object store's log is listed from when this process has not listed it yet."""
        self._files = TableFiles(location)
        self.location = self._files.location
        self.root_uri = self._files.root_uri
        self._listing = CurrentListing(self._files, since, self._forget_versions)
        self._commits = Commits(self._files, self._listing)
        self._timeline = Timeline(self.location, self._listing, self._commits)
        self._deltalake = DeltalakeSnapshots(self._files, self._listing, self._commits)
        self._snapshots = Snapshots(self._files, self._commits, self._deltalake)
        self._intervals = Intervals(self._files, self._listing, self._commits, self._snapshots)

    def __repr__(self) -> str:
        return f"DeltaLog({self.location!r})"

    def _forget_versions(self) -> None:
        """The table was re-created in its folder: the versions kept name other commits now."""
        self._snapshots.forget()
        self._commits.forget()

    # -- versions and time ------------------------------------------------------------------------

    def exists(self) -> bool:
        return self._listing.exists()

    def latest_version(self) -> int:
        """The newest committed version; :class:`TableNotFound` without one."""
        return self._listing.latest_version()

    def latest_checkpoint(self, *, now: bool = False) -> Optional[int]:
        """The version of the newest checkpoint, None without one; with ``now``, as the log is
        now, where this instance answers from an earlier listing (:meth:`hold_listing`)."""
        checkpoints = (self._listing.now() if now else self._listing.get()).checkpoints
        return checkpoints[-1] if checkpoints else None

    def commit_timestamp(self, version: int) -> int:
        """When ``version`` was committed, in epoch milliseconds (:meth:`Timeline.commit_timestamp`)."""
        return self._timeline.commit_timestamp(version)

    def version_at(self, timestamp_ms: int) -> Optional[int]:
        """The latest version committed at or before ``timestamp_ms`` (:meth:`Timeline.version_at`)."""
        return self._timeline.version_at(timestamp_ms)

    def hold_listing(self) -> "DeltaLog":
        """From now on answer from one listing, taken now: a refresh reads each source at the
        version it observed, so commits landing later are the next refresh's, and the source's
        log is not listed again for each question (docs/ARCHITECTURE.md, "Reading sources").
        Never for a table the caller writes."""
        self._listing.hold()
        return self

    # -- snapshots --------------------------------------------------------------------------------

    def snapshot(self, version: int) -> Snapshot:
        """The table at ``version`` (cached); :class:`HistoryUnavailable` if it cannot be rebuilt."""
        return self._snapshots.get(version)

    def for_writing(self) -> DeltaTable:
        """The table at its latest version, for this process to write with deltalake; hand it back
        with :meth:`written` (:meth:`DeltalakeSnapshots.for_writing`)."""
        return self._deltalake.for_writing()

    def written(self, table: DeltaTable) -> None:
        """``table`` committed a version from this process: the next snapshot of that version
        starts from it instead of the log."""
        self._deltalake.written(table)

    def schema_at(self, version: int) -> StructType:
        return self.snapshot(version).schema

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
        return total_rows(tuple(self.snapshot(version).files.values()))

    def size_bytes(self, version: int) -> int:
        """The size of the table's live data files at ``version``."""
        return sum(f.size_bytes for f in self.snapshot(version).files.values())

    def num_records(self, version: int) -> Optional[int]:
        """The rows of the table's live data files at ``version`` by their statistics; None when
        a file has none."""
        return total_rows(self.files_at(version))

    def files_at(self, version: int) -> Tuple[DataFile, ...]:
        return tuple(self.snapshot(version).files.values())

    # -- commits ----------------------------------------------------------------------------------

    def commit_id(self, version: int) -> str:
        """The identity of ``version``'s commit (:meth:`Commits.commit_id`)."""
        return self._commits.commit_id(version)

    def operation_metrics(self, version: int) -> Dict[str, int]:
        """The row and file counts the writer of ``version`` recorded (:attr:`Commit.metrics`)."""
        return self._commits.read(version).metrics

    def rows_added_and_removed(self, version: int) -> Optional[Tuple[int, int]]:
        """The rows ``version``'s commit added and removed (:attr:`Commit.rows_added_and_removed`)."""
        return self._commits.read(version).rows_added_and_removed

    def commit_info(self, version: int) -> Mapping[str, Any]:
        """The ``commitInfo`` action its writer recorded in ``version``'s commit."""
        return self._commits.read(version).commit_info

    def lost_commit(self, version: int, commit: str) -> Optional[str]:
        """Why this log no longer holds ``commit`` at ``version``; None when it does
        (:meth:`Commits.lost_commit`)."""
        return self._commits.lost_commit(version, commit)

    def data_change_after(self, version: int) -> Optional[str]:
        """The first commit after ``version`` that changed the table's rows, described
        (:meth:`Commits.data_change_after`)."""
        return self._commits.data_change_after(version)

    def first_data_change_after(self, version: int) -> Optional[int]:
        """The first version after ``version`` whose commit changed rows
        (:meth:`Commits.first_data_change_after`)."""
        return self._commits.first_data_change_after(version)

    # -- intervals --------------------------------------------------------------------------------

    def interval_identity(self, v0: int, v1: int) -> Optional[IntervalIdentity]:
        """What names the change over ``(v0, v1]`` in the process (:meth:`Intervals.identity`)."""
        return self._intervals.identity(v0, v1)

    def interval(self, v0: int, v1: int, *, table_id: Optional[str] = None) -> Interval:
        """The change over ``(v0, v1]`` (:meth:`Intervals.interval`)."""
        return self._intervals.interval(v0, v1, table_id=table_id)

    def columns_changed(self, v0: int, v1: int) -> Optional[str]:
        """How the table's columns changed from ``v0`` to ``v1``, in words; None when they did
        not (:meth:`Intervals.columns_changed`)."""
        return self._intervals.columns_changed(v0, v1)

    def change_data_feed_covers(self, v0: int, v1: int) -> bool:
        """Whether the engine's change data feed can serve ``(v0, v1]``
        (:meth:`Intervals.change_data_feed_covers`)."""
        return self._intervals.change_data_feed_covers(v0, v1)

    # -- files ------------------------------------------------------------------------------------

    @property
    def root(self) -> Tuple[pafs.FileSystem, str]:
        """The file system holding the table and the table's folder there."""
        return self._files.fs, self._files.folder

    def file_path(self, data_file: DataFile) -> Tuple[pafs.FileSystem, str]:
        """The file system holding ``data_file`` and its path there."""
        return self._files.file_path(data_file)
