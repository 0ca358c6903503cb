"""The metadata Delta tables: frontiers, refresh history and graph history.

They are written with the `deltalake` package straight to their locations, not through the engine:
a NO_DATA refresh then reads its frontier and appends its history row in milliseconds, with no
engine job. They are also registered in the engine's catalog so users query them with SQL:

    select * from dyntable_meta.dynamic_table_refresh_history where name = 'shop.orders_dt'

``dynamic_table_frontiers`` has one row per dynamic table; its ``pending`` column holds a refresh's
intent while it runs (docs/ARCHITECTURE.md, "Exactly once"): set before the MERGE, cleared with the
new frontier after it (inside a batch, at the batch's end).

:class:`MetadataStore` is what the rest of the plugin uses; under it, ``tables`` (names, columns,
log settings, damage), ``rows`` (typed rows, the intent), ``open_tables`` (the tables a process
holds open, their cached rows, reads), ``access`` (reads and commits retried through other
processes' writes and repaired where damaged), ``repair`` (rebuilding a damaged table),
``batches`` (what waits for a batch's end), ``compaction`` and ``migration`` (creating and
upgrading the tables, the prefetch).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, ContextManager, Dict, Iterator, List, Optional, Union

from dbt.adapters.dyntable.dynamic_table import claims as claims_of
from dbt.adapters.dyntable.dynamic_table.claims import Claim
from dbt.adapters.dyntable.dynamic_table.lifecycle import State
from dbt.adapters.dyntable.dynamic_table.locking import LOCKS_DIR
from dbt.adapters.dyntable.dynamic_table.metadata.access import TableAccess
from dbt.adapters.dyntable.dynamic_table.metadata.batches import Batches
from dbt.adapters.dyntable.dynamic_table.metadata.compaction import COMPACT_EVERY, Compaction
from dbt.adapters.dyntable.dynamic_table.metadata.migration import Migration
from dbt.adapters.dyntable.dynamic_table.metadata.open_tables import OpenTables
from dbt.adapters.dyntable.dynamic_table.metadata.repair import Repaired, Repairs
from dbt.adapters.dyntable.dynamic_table.metadata.rows import (
    LEASE_FREE_STAMP,
    Frontier,
    GraphRow,
    HistoryRow,
    Intent,
    Sources,
    SourceVersion,
    recency,
    utcnow,
    versions_of,
)
from dbt.adapters.dyntable.dynamic_table.metadata.tables import (
    CACHED_TABLES,
    FRONTIERS,
    GRAPH_HISTORY,
    LOG_SETTINGS,
    REFRESH_HISTORY,
    SCHEMAS,
    MetadataDamaged,
)

__all__ = [
    "CACHED_TABLES",
    "COMPACT_EVERY",
    "FRONTIERS",
    "GRAPH_HISTORY",
    "LOG_SETTINGS",
    "REFRESH_HISTORY",
    "SCHEMAS",
    "Frontier",
    "GraphRow",
    "HistoryRow",
    "Intent",
    "MetadataDamaged",
    "MetadataStore",
    "Repaired",
    "SourceVersion",
    "Sources",
    "utcnow",
    "versions_of",
]


class MetadataStore:
    """Reads and writes the three metadata tables under ``root`` (one folder per table)."""

    def __init__(
        self,
        root: Union[str, Path],
        schema: str,
        history_retention_days: Optional[int] = None,
        repairs: bool = False,
    ) -> None:
        """``repairs``: see :attr:`repairs`. ``history_retention_days``: refresh history older
        than this many days is dropped when the table is compacted."""
        self._tables = OpenTables(root, schema)
        #: Where the refresh locks and writer marks are kept.
        self.locks = f"{self._tables.root}/{LOCKS_DIR}"
        self._repairs = Repairs(self._tables, self.locks, repairs)
        self._batches = Batches(self.locks)
        self._compaction = Compaction(self._tables, self._batches, self.locks, history_retention_days)
        self._access = TableAccess(self._tables, self._repairs, self._compaction.after_commit)
        self._migration = Migration(self._tables, self._repairs, self._access)

    @property
    def repairs(self) -> bool:
        """Whether a table found damaged is repaired in place and the work goes on, with a
        warning (:meth:`take_warnings`), where otherwise :class:`MetadataDamaged` stops it: the
        refreshes' store repairs, the `dyntable` commands that only read report."""
        return self._repairs.enabled

    @repairs.setter
    def repairs(self, repairs: bool) -> None:
        self._repairs.enabled = repairs

    def location(self, table: str) -> str:
        return self._tables.location(table)

    def ensure(self, register: Optional[Any] = None) -> None:
        """:meth:`Migration.ensure`: create missing tables, bring the others up to date."""
        self._migration.ensure(register)

    def prefetch(self) -> None:
        """:meth:`Migration.prefetch`: open the tables and read ahead of the first refresh."""
        self._migration.prefetch()

    def one_look(self, batch_wide: bool = False) -> ContextManager[None]:
        """:meth:`OpenTables.one_look`: inside, each table is checked for new commits once (per
        batch where ``batch_wide``)."""
        return self._tables.one_look(batch_wide)

    # -- frontiers -------------------------------------------------------------------------------

    def frontier(self, name: str) -> Optional[Frontier]:
        return self.frontiers(name).get(name)

    def frontiers(self, name: Optional[str] = None) -> Dict[str, Frontier]:
        """Every DT's frontier (or ``name``'s), from one read of the table (a runner tick asks
        for all)."""
        latest: Dict[str, Dict[str, Any]] = {}
        for row in sorted(self._access.rows(FRONTIERS, name), key=recency):
            latest[row["name"]] = row
        frontiers = {key: Frontier.from_record(row) for key, row in latest.items()}
        for key, reached in self._batches.unwritten_frontiers(name).items():
            read = frontiers.get(key)
            if read is None or read.updated_at is None or reached.newer_than(read):
                frontiers[key] = reached  # not written yet, and newer than what the table says
        return frontiers

    def advance(self, current: Frontier, intent: Intent, claim: Optional[Claim] = None) -> Frontier:
        """The frontier of a NO_DATA refresh: ``current`` moved to the intent's data timestamp,
        the DT untouched (written as :meth:`_reached` says). ``claim``: the refresh decided
        without the DT's lease (docs/ARCHITECTURE.md, "Object storage"): its frontier is stamped
        just after ``current``, so that any row written since by a refresh that held the lease
        (an intent, a frontier) is newer and wins, and it waits for the batch's end, which
        withdraws it if such a refresh moved the DT meanwhile (:meth:`close_batch`)."""
        reached = current.committing(intent, current.dt_version, current.dt_commit)
        if claim is None or current.updated_at is None:
            return self._reached(reached)
        stamped = replace(reached, updated_at=current.updated_at + LEASE_FREE_STAMP)
        if not self._batches.defer_frontier(stamped, claim):
            self._upsert_frontier(stamped)
        return stamped

    def _reached(self, frontier: Frontier) -> Frontier:
        """Record the frontier a refresh reached, stamped now (the refresh holds the DT's lock).
        Inside a batch it is written at the batch's end: a later refresh's frontier, written by
        any process, is newer and wins. A crash before the end costs a NO_DATA refresh one more
        NO_DATA refresh; a refresh that committed the DT left its intent, in the DT's commit or
        in the frontier's ``pending``, which the next refresh resolves (docs/ARCHITECTURE.md,
        "Exactly once")."""
        stamped = replace(frontier, updated_at=utcnow())
        if not self._batches.defer_frontier(stamped):
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
        self._batches.drop_frontier(name)
        self._access.commit(
            FRONTIERS,
            lambda: self._tables.table(FRONTIERS).delete(_eq("name", name)),
            patch=lambda rows: [r for r in rows if r["name"] != name],
        )

    def _upsert_frontier(self, frontier: Frontier) -> None:
        """Record ``frontier`` as the DT's, stamped now unless it carries its stamp (an advance).

        An append: a DT's frontier is its latest row (``updated_at``), and compaction drops the
        rows it superseded. Appending reads nothing, where a replaceWhere finds and rewrites the
        file holding the old row."""
        stamped = replace(frontier, updated_at=frontier.updated_at or utcnow())
        self._access.append(FRONTIERS, [stamped.to_record()])

    def writer(self) -> Optional[str]:
        """:meth:`Batches.writer`: the mark an intent records, None outside a batch."""
        return self._batches.writer()

    def writer_alive(self, mark: str) -> bool:
        """:meth:`Batches.writer_alive`: whether ``mark``'s process will write its frontier."""
        return self._batches.writer_alive(mark)

    # -- histories -------------------------------------------------------------------------------

    def append_history(self, row: HistoryRow) -> None:
        record = row.to_record()
        if not self._batches.defer_history(record):
            self._access.append(REFRESH_HISTORY, [record])

    def history(self, name: Optional[str] = None, since: Optional[datetime] = None) -> List[HistoryRow]:
        """Every refresh recorded (or ``name``'s; those started at or after ``since``), the
        batch's rows not yet written included."""
        pending = self._batches.unwritten_history(name, since)
        rows = self._access.rows(REFRESH_HISTORY, name, since)
        # A row written since it was taken from memory is read once (a refresh's rows differ by
        # trigger: RECOVERY for one its process did not record).
        read = {(r["refresh_id"], r["refresh_trigger"]) for r in rows}
        unwritten = [r for r in pending if (r["refresh_id"], r["refresh_trigger"]) not in read]
        return [
            HistoryRow.from_record(row)
            for row in sorted(rows + unwritten, key=lambda r: r["refresh_start_time"])
        ]

    def append_graph(self, row: GraphRow) -> None:
        self._access.append(GRAPH_HISTORY, [replace(row, inputs=sorted(row.inputs)).to_record()])

    def graph(self, name: Optional[str] = None) -> Dict[str, GraphRow]:
        """The latest graph row per DT."""
        latest: Dict[str, Dict[str, Any]] = {}
        for row in sorted(self._access.rows(GRAPH_HISTORY, name), key=lambda r: r["recorded_at"]):
            latest[row["name"]] = row
        return {key: GraphRow.from_record(row) for key, row in latest.items()}

    # -- batches ---------------------------------------------------------------------------------

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
        self._tables.new_batch()
        self._batches.open()

    @property
    def batch_open(self) -> bool:
        """Whether a batch is open: what refreshes reach waits for its end."""
        return self._batches.is_open

    def close_batch(self) -> None:
        history, reached = self._batches.closing()
        # Claims arise in an object store only, where the refreshes decide NO_DATA without the lease.
        claims = self._batches.claims(reached) if claims_of.lease_free(self.locks) else []
        published = claims_of.publish(self.locks, claims) if claims else None
        try:
            if claims:
                self._withdraw(claims_of.moved(self.locks, claims), history, reached)
            if history:
                self._access.append(REFRESH_HISTORY, history)
            if reached:
                self._access.append(FRONTIERS, [frontier.to_record() for frontier in reached.values()])
        finally:
            if published is not None:
                published.release()
        for table in sorted(self._batches.written(history, reached)):
            self._compaction.compact(table)

    def _withdraw(
        self, withdrawn: List[Claim], history: List[Dict[str, Any]], reached: Dict[str, Frontier]
    ) -> None:
        """Leave out the frontiers of ``withdrawn`` claims, and record their refreshes SKIPPED
        (docs/ARCHITECTURE.md, "Object storage")."""
        self._batches.withdraw(withdrawn, reached)
        ids = {claim.refresh_id for claim in withdrawn}
        for record in history:
            if record["refresh_id"] in ids:
                record.update(state=State.SKIPPED.value, state_message=claims_of.WITHDRAWN, dt_version=None)

    # -- repair ----------------------------------------------------------------------------------

    def repair(self) -> List[Repaired]:
        """:meth:`Repairs.repair`: rebuild every damaged table, moving its folder aside."""
        return self._repairs.repair()

    def take_warnings(self) -> List[str]:
        """What this store repaired since it was last asked (each said once)."""
        return self._repairs.take_warnings()


def _eq(column: str, value: str) -> str:
    return f"{column} = '" + value.replace("'", "''") + "'"
