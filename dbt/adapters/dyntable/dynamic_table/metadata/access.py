"""Reads and commits of the metadata tables that outlast other processes: a commit beaten by
another one's is tried again, a log another process was cleaning up is read afresh, and a table
found damaged is repaired when the store repairs (docs/ARCHITECTURE.md, "Metadata tables")."""

from __future__ import annotations

import contextlib
import time
from datetime import datetime
from typing import Any, Callable, Dict, List, Optional, TypeVar

import pyarrow as pa
from deltalake import write_deltalake
from deltalake.exceptions import CommitFailedError

from dbt.adapters.dyntable.dynamic_table.metadata.open_tables import OpenTables, Rows
from dbt.adapters.dyntable.dynamic_table.metadata.repair import Repairs
from dbt.adapters.dyntable.dynamic_table.metadata.tables import (
    DAMAGE_ERRORS,
    ROW_KEYS,
    SCHEMAS,
    MetadataDamaged,
)

COMMIT_RETRIES = 20
#: Reads and writes that meet a log another process is checkpointing and cleaning up (these
#: tables keep no log history: a reader may list commits a moment before they are removed) are
#: tried this many times more, the table read afresh each time, before it is called damaged.
TRANSIENT_RETRIES = 3

_Done = TypeVar("_Done")


class TableAccess:
    """Reads and commits on ``tables``; ``after_commit(table, version)`` follows each commit this
    store makes (compaction falls due by it)."""

    def __init__(
        self, tables: OpenTables, repairs: Repairs, after_commit: Callable[[str, int], None]
    ) -> None:
        self.tables = tables
        self.repairs = repairs
        self._after_commit = after_commit

    def or_repaired(self, table: str, work: Callable[[], _Done]) -> _Done:
        """``work`` on ``table``; when it finds the table damaged and this store repairs, the
        table is repaired and ``work`` runs again (docs/ARCHITECTURE.md, "Metadata tables")."""
        try:
            return work()
        except MetadataDamaged as damaged:
            if not self.repairs.enabled:
                raise
            self.repairs.repair_damaged(table, damaged)
        return work()

    def rows(self, table: str, name: Optional[str], since: Optional[datetime] = None) -> Rows:
        return self.or_repaired(table, lambda: self._rows_read_afresh(table, name, since))

    def _rows_read_afresh(self, table: str, name: Optional[str], since: Optional[datetime]) -> Rows:
        for attempt in range(TRANSIENT_RETRIES + 1):
            try:
                return self.tables.read_rows(table, name, since)
            except MetadataDamaged:
                # What this process opened may be a table another one re-created since (a
                # repair), or a log another one was cleaning up as it was read: it is damaged
                # only if it stays so when read afresh.
                if attempt == TRANSIENT_RETRIES:
                    raise
                self.tables.forget(table)
                time.sleep(0.01 * attempt)
        raise AssertionError("unreachable")

    def append(self, table: str, records: List[Dict[str, Any]]) -> None:
        data = pa.Table.from_pylist(records, schema=SCHEMAS[table])
        self.commit(
            table,
            lambda: write_deltalake(self.tables.table(table), data, mode="append"),
            patch=lambda rows: rows + data.to_pylist(),
            landed=lambda: self._holds(table, records),
        )

    def _holds(self, table: str, records: List[Dict[str, Any]]) -> bool:
        """Whether ``table`` holds ``records`` (a write that failed after its commit landed)."""
        key = ROW_KEYS[table]
        held = {tuple(row[k] for k in key) for row in self.tables.read_rows(table, None)}
        return all(tuple(record[k] for k in key) in held for record in records)

    def commit(
        self,
        table: str,
        write: Callable[[], Any],
        patch: Optional[Callable[[Rows], Rows]] = None,
        landed: Optional[Callable[[], bool]] = None,
    ) -> None:
        """Run a metadata write, retrying when another process committed first, or cleaned up
        the log it read; ``landed`` says whether a write that failed committed all the same
        (without it the write is one that may run twice). ``patch`` turns the cached rows into
        the written version's when the write committed right after them."""
        self.or_repaired(table, lambda: self._commit_once(table, write, patch, landed))

    def _commit_once(
        self,
        table: str,
        write: Callable[[], Any],
        patch: Optional[Callable[[Rows], Rows]],
        landed: Optional[Callable[[], bool]],
    ) -> None:
        tables = self.tables
        transient = 0
        with tables.write_lock, tables.reading(table):
            for attempt in range(COMMIT_RETRIES):
                tables.look_again(table)  # each attempt writes from the table's latest version
                try:
                    with tables.lock:
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
                    tables.forget(table)
                    time.sleep(0.01 * transient)
                    with contextlib.suppress(MetadataDamaged, *DAMAGE_ERRORS):
                        if landed is not None and landed():
                            break
            version = tables.committed(table, patch)
        self._after_commit(table, version)
