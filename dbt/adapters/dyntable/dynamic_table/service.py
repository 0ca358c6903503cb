"""Wires a refresh together for one engine: metadata store, locks and the refresher.

Both the materialization (through the adapter) and the `dyntable` runner build one of these, so
there is exactly one refresh code path.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from dbt.adapters.dyntable.dynamic_table.config import DynamicTableConfig, definition_hash
from dbt.adapters.dyntable.dynamic_table.metadata import GraphRow, HistoryRow, MetadataStore, utcnow
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

    # -- scheduling state: consecutive failures, suspend, resume (the runner; seed 003) ----------

    def record_failure(self, dt: DynamicTable) -> int:
        """Count one more consecutive failure (the refresh already wrote its FAILED history row);
        return the count. A successful refresh resets it (``_record_graph``)."""
        row = self._latest_graph_row(dt)
        row.consecutive_failures += 1
        self.metadata.append_graph(row)
        return row.consecutive_failures

    def suspend(self, dt: DynamicTable) -> None:
        row = self._latest_graph_row(dt)
        row.scheduling_state = "SUSPENDED"
        self.metadata.append_graph(row)

    def resume(self, dt: DynamicTable) -> None:
        """ACTIVE again with a clean failure count: the next due tick refreshes it."""
        row = self._latest_graph_row(dt)
        row.scheduling_state = "ACTIVE"
        row.consecutive_failures = 0
        self.metadata.append_graph(row)

    def record_not_refreshed(
        self, dt: DynamicTable, data_timestamp: datetime, trigger: str, state: str, message: str
    ) -> None:
        """A refresh-history row for a refresh that did not run (SKIPPED, UPSTREAM_FAILED)."""
        now = utcnow()
        self.metadata.append_history(HistoryRow(
            name=dt.name, refresh_id=uuid.uuid4().hex, data_timestamp=data_timestamp,
            state=state, refresh_action=None, refresh_trigger=trigger,
            refresh_start_time=now, refresh_end_time=now, state_message=message,
        ))

    def _latest_graph_row(self, dt: DynamicTable) -> GraphRow:
        """The DT's latest graph row, as a fresh row to change and append."""
        previous = self.metadata.graph(dt.name).get(dt.name)
        if previous is None:
            return GraphRow(
                name=dt.name,
                inputs=[],
                target_lag=str(dt.config.target_lag),
                effective_target_lag_seconds=dt.config.target_lag.seconds,
                scheduling_state="ACTIVE",
                consecutive_failures=0,
                definition_hash=definition_hash(dt.sql, dt.config),
                refresh_mode=dt.config.refresh_mode,
            )
        return GraphRow(
            name=dt.name,
            inputs=list(previous["inputs"]),
            target_lag=previous["target_lag"],
            effective_target_lag_seconds=previous["effective_target_lag_seconds"],
            scheduling_state=previous["scheduling_state"],
            consecutive_failures=previous["consecutive_failures"] or 0,
            definition_hash=previous["definition_hash"],
            refresh_mode=previous["refresh_mode"],
        )


def dynamic_table_from_model(
    schema: str,
    identifier: str,
    sql: str,
    config: Mapping[str, Any],
    model_name: str,
    declared_keys: Optional[Mapping[str, List[List[str]]]] = None,
) -> DynamicTable:
    return DynamicTable(
        schema, identifier, sql, DynamicTableConfig.from_model(model_name, config),
        dict(declared_keys or {}),
    )
