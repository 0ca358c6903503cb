"""Compacting the metadata tables, so that reading one costs the same after a thousand refreshes
as after one (docs/ARCHITECTURE.md, "Metadata tables")."""

from __future__ import annotations

from datetime import timedelta
from typing import Optional

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError

from dbt.adapters.dyntable.dynamic_table.locking import ExclusiveLock, LockHeld
from dbt.adapters.dyntable.dynamic_table.metadata.batches import Batches
from dbt.adapters.dyntable.dynamic_table.metadata.open_tables import OpenTables
from dbt.adapters.dyntable.dynamic_table.metadata.rows import utcnow
from dbt.adapters.dyntable.dynamic_table.metadata.tables import (
    DAMAGE_ERRORS,
    FRONTIERS,
    REFRESH_HISTORY,
    SCHEMAS,
    MetadataDamaged,
)

#: Every metadata commit adds a small file and every read lists them all: compact a table's files
#: into one every this many commits, so a read stays one file wide however long the runner runs.
COMPACT_EVERY = 25
#: Compaction's vacuum deletes the data files removed this long ago: every reader reads the latest
#: version, and one that loaded a version whose files went since reads afresh
#: (``TableAccess.rows``). Without it, each commit's small file stayed on disk: 1,400 files after
#: 1,000 refreshes.
VACUUM_RETENTION_HOURS = 1


class Compaction:
    """Compacts ``tables`` every ``COMPACT_EVERY`` commits, at the end of the batch it fell due
    in; refresh history older than ``history_retention_days`` is dropped as it does. ``locks``:
    the folder of the lock that lets one process at a time compact a table."""

    def __init__(
        self, tables: OpenTables, batches: Batches, locks: str, history_retention_days: Optional[int]
    ) -> None:
        self.tables = tables
        self.batches = batches
        self.locks = locks
        self.history_retention_days = history_retention_days

    def after_commit(self, table: str, version: int) -> None:
        """Compact ``table`` when its commit at ``version`` makes it due: now, or at a batch's end
        inside one: compaction takes 45-60 ms where a commit takes 6-10, and would otherwise
        land on whichever refresh made the ``COMPACT_EVERY``-th commit, inside its DT's lock
        (docs/ARCHITECTURE.md, "Metadata tables")."""
        if version % COMPACT_EVERY == 0 and not self.batches.defer_compaction(table):
            self.compact(table)

    def compact(self, table: str) -> None:
        """Drop the rows that no longer count (superseded frontiers, history older than the
        retention), then merge the table's small files, so reading it costs the same after a
        thousand refreshes as after one, and delete the files removed before
        ``VACUUM_RETENTION_HOURS``, so its folder stays as small.

        One process at a time, from the table's latest version: deltalake lets two OPTIMIZEs of
        the same files both commit (their removes change no data, which its conflict checker
        lets pass), and the second adds every row again (docs/ARCHITECTURE.md, "Metadata
        tables"). A process that finds another compacting leaves it to that one."""
        try:
            lock = ExclusiveLock(self.locks, f"{table}.compaction").acquire()
        except LockHeld:
            return
        try:
            self._compact(table)
        finally:
            lock.release()

    def _compact(self, table: str) -> None:
        tables = self.tables
        with tables.write_lock, tables.reading(table), tables.lock:
            try:
                tables.look_again(table)
                opened = tables.table(table)
                if table == FRONTIERS:
                    self.prune_frontiers(opened)
                elif table == REFRESH_HISTORY and self.history_retention_days:
                    cutoff = utcnow() - timedelta(days=self.history_retention_days)
                    opened.delete(f"refresh_start_time < '{cutoff.isoformat()}'")
                opened.optimize.compact()
                opened.vacuum(VACUUM_RETENTION_HOURS, dry_run=False, enforce_retention_duration=False)
                tables.drop_cached(table)
            except CommitFailedError:
                pass  # another process wrote meanwhile; a later commit compacts
            except (MetadataDamaged, *DAMAGE_ERRORS):
                # Read as another process's checkpoint cleaned up the commits it had read: read
                # afresh next time; a table damaged indeed is reported by its next read.
                tables.forget(table)

    def prune_frontiers(self, opened: DeltaTable) -> None:
        """Rewrite the frontiers table with each DT's latest row only. The overwrite removes the
        files it read: a row another process appends meanwhile stays."""
        rows = self.tables.dataset(FRONTIERS).to_table()
        # Per name, its latest row as ``rows.recency`` orders them; of equal ones the later row
        # (a stable sort).
        order = pa.array(range(rows.num_rows), pa.int64())
        ranked = (
            rows.select(["name", "updated_at", "data_timestamp"])
            .append_column("_row", order)
            .sort_by([("updated_at", "ascending"), ("data_timestamp", "ascending")])
        )
        ranked = ranked.append_column("_rank", pa.array(range(rows.num_rows), pa.int64()))
        latest = ranked.group_by("name", use_threads=False).aggregate([("_rank", "max")])
        if latest.num_rows < rows.num_rows:
            keep = pc.take(ranked.column("_row"), latest.column("_rank_max"))
            data = rows.take(keep).select(SCHEMAS[FRONTIERS].names).cast(SCHEMAS[FRONTIERS])
            write_deltalake(opened, data, mode="overwrite")
