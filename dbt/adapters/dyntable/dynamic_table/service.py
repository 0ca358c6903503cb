"""Wires a refresh together for one engine: metadata store, locks and the refresher.

Both the materialization (through the adapter) and the `dyntable` runner build one of these, so
there is exactly one refresh code path.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from dbt.adapters.dyntable.dynamic_table.config import DynamicTableConfig, definition_hash
from dbt.adapters.dyntable.dynamic_table.metadata import GraphRow, MetadataStore
from dbt.adapters.dyntable.dynamic_table.refresh import DynamicTable, Refresher, RefreshResult
from dbt.adapters.dyntable.engines.base import Engine
from dbt.adapters.dyntable.engines.warehouse import PersistedTable, quote

LOCKS_DIR = ".locks"


class DynamicTableService:
    def __init__(self, engine: Engine, warehouse: Path, metadata_schema: str) -> None:
        self.engine = engine
        root = warehouse / metadata_schema.lower()
        self.metadata = MetadataStore(root, metadata_schema)
        self.metadata.ensure(register=self._register)
        self.refresher = Refresher(engine, self.metadata, root / LOCKS_DIR)

    def _register(self, schema: str, table: str, location: Path) -> None:
        self.engine.execute(f"CREATE SCHEMA IF NOT EXISTS {quote(schema)}")
        self.engine.execute(PersistedTable(schema, table, location).create_statement())

    def refresh(
        self,
        dt: DynamicTable,
        data_timestamp: datetime,
        trigger: str,
        full_refresh: bool = False,
    ) -> RefreshResult:
        if data_timestamp.tzinfo is None:
            data_timestamp = data_timestamp.replace(tzinfo=timezone.utc)
        result = self.refresher.refresh(dt, data_timestamp, trigger, full_refresh)
        self._record_graph(dt, result)
        return result

    def _record_graph(self, dt: DynamicTable, result: RefreshResult) -> None:
        """Append a graph row when the DT's inputs, lag or definition changed."""
        previous = self.metadata.graph(dt.name).get(dt.name)
        row = GraphRow(
            name=dt.name,
            inputs=sorted(result.source_versions),
            target_lag=str(dt.config.target_lag),
            effective_target_lag_seconds=dt.config.target_lag.seconds,
            scheduling_state=previous["scheduling_state"] if previous else "ACTIVE",
            consecutive_failures=0,
            definition_hash=definition_hash(dt.sql, dt.config),
            refresh_mode=dt.config.refresh_mode,
        )
        keys = ("inputs", "target_lag", "definition_hash", "refresh_mode", "consecutive_failures")
        if previous is None or any(previous[k] != getattr(row, k) for k in keys):
            self.metadata.append_graph(row)


def dynamic_table_from_model(schema: str, identifier: str, sql: str, config: Mapping[str, Any], model_name: str) -> DynamicTable:
    return DynamicTable(schema, identifier, sql, DynamicTableConfig.from_model(model_name, config))
