"""Creating the metadata tables and bringing tables an older version of the plugin made up to this
version's columns and log settings; a prefetch opens them and reads ahead of the first refresh."""

from __future__ import annotations

import functools
from typing import Any, List, Optional, Set

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import CommitFailedError, DeltaError
from deltalake.schema import Field as DeltaField

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.dynamic_table.metadata.access import TableAccess
from dbt.adapters.dyntable.dynamic_table.metadata.open_tables import OpenTables
from dbt.adapters.dyntable.dynamic_table.metadata.repair import Repairs
from dbt.adapters.dyntable.dynamic_table.metadata.tables import CACHED_TABLES, LOG_SETTINGS, NO_LOG, SCHEMAS


def _has_log_settings(table: DeltaTable) -> bool:
    configuration = table.metadata().configuration
    return all(configuration.get(k) == v for k, v in LOG_SETTINGS.items())


class Migration:
    """Makes ``tables`` what this version of the plugin records, repaired by ``repairs`` where
    damaged; ``access`` reads what a prefetch reads."""

    def __init__(self, tables: OpenTables, repairs: Repairs, access: TableAccess) -> None:
        self.tables = tables
        self.repairs = repairs
        self.access = access
        # Tables ``prefetch`` found with every column and log setting ``ensure`` would give them:
        # it need not look at them again.
        self._current: Set[str] = set()

    def ensure(self, register: Optional[Any] = None) -> None:
        """Create missing tables and add the columns newer versions of the plugin record;
        ``register(schema, table, location)`` adds the tables it creates to a catalog (those it
        finds were registered by the process that created them, and the embedded engine
        re-attaches every table at start)."""
        tables, repairs = self.tables, self.repairs
        # A table ``prefetch`` found current a moment ago stays so: columns are only added.
        current = self._current
        existing = self._existing()
        tables.open_side_by_side([t for t in existing if t not in current])
        with tables.one_look():  # opened a moment ago, or by ``prefetch``: one check each
            for table in existing:
                if table not in current:
                    self.access.or_repaired(table, functools.partial(self._bring_up_to_date, table))
        for table, schema in SCHEMAS.items():
            path = tables.location(table)
            if table in existing:
                continue
            if any(f.name.endswith(".parquet") for f in tables.storage.files(path)):
                if not repairs.enabled:
                    raise tables.damaged(table, NO_LOG)
                repairs.repair_damaged(table, tables.damaged(table, NO_LOG))
            tables.storage.make_folder(path)
            try:
                storage.create_delta(path, schema=schema, mode="ignore", configuration=LOG_SETTINGS)
            except DeltaError:
                pass  # another process created it first
            if register is not None:
                register(tables.schema, table, path)

    def prefetch(self) -> None:
        """Open the tables that exist and read the rows every refresh reads (frontiers, graph),
        so that a process's first refresh finds them in memory: the connection manager runs this
        on a thread of its own while the engine starts (docs/ARCHITECTURE.md, "Metadata tables").
        Read-only: a missing table is left for ``ensure`` to create, a damaged one for the first
        refresh to report."""
        existing = self._existing()
        self.tables.open_side_by_side(existing)
        for table in CACHED_TABLES:
            if table in existing:
                self.access.rows(table, None)
        with self.tables.lock:
            for table in existing:
                opened = self.tables.held(table)
                if opened is not None and self._is_current(opened, SCHEMAS[table]):
                    self._current.add(table)

    def _existing(self) -> List[str]:
        """The tables that exist; one ``prefetch`` found current is not looked for again."""
        return [t for t in SCHEMAS if t in self._current or storage.is_delta_table(self.tables.location(t))]

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
        with self.tables.lock:
            existing = self.tables.table(table)  # opened once: later reads catch up from here
            known = {f.name for f in existing.schema().fields}
        missing = [f for f in schema if f.name not in known]
        if missing:
            try:
                with self.tables.lock:
                    existing.alter.add_columns([DeltaField.from_arrow(f) for f in missing])
            except (CommitFailedError, DeltaError):
                pass  # another process added them first
            self.tables.drop_cached(table)

    def _set_log_settings(self, table: str) -> None:
        """Give a table made by an older version of the plugin the ``LOG_SETTINGS``: one commit."""
        with self.tables.lock:
            existing = self.tables.table(table)
            if _has_log_settings(existing):
                return
            try:
                existing.alter.set_table_properties(LOG_SETTINGS)
            except (CommitFailedError, DeltaError):
                pass  # another process set them first
