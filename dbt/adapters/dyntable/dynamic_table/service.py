"""Dynamic tables on one engine: its metadata store, refresh locks and refresh pipeline.

The adapter (for the materialization) and the `dyntable` runner each hold one, so there is exactly
one refresh code path; the connection manager owns the adapter's, as it owns the engine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from dbt.adapters.dyntable.dynamic_table.metadata import MetadataStore
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.refresh import RefreshPipeline, RefreshRequest, RefreshResult
from dbt.adapters.dyntable.dynamic_table.verify import DvsCheck
from dbt.adapters.dyntable.engines.base import Engine
from dbt.adapters.dyntable.engines.warehouse import PersistedTable
from dbt.adapters.dyntable.vocabulary import quote

LOCKS_DIR = ".locks"


class DynamicTableService:
    def __init__(
        self,
        engine: Engine,
        warehouse: Path,
        metadata_schema: str,
        history_retention_days: Optional[int] = None,
    ) -> None:
        self.engine = engine
        root = warehouse / metadata_schema.lower()
        self.metadata = MetadataStore(root, metadata_schema, history_retention_days)
        self.metadata.ensure(register=self._register)
        self.pipeline = RefreshPipeline(engine, self.metadata, root / LOCKS_DIR)
        self.recorder = self.pipeline.recorder

    def _register(self, schema: str, table: str, location: Path) -> None:
        self.engine.execute(f"CREATE SCHEMA IF NOT EXISTS {quote(schema)}")
        self.engine.execute(PersistedTable(schema, table, location).create_statement())

    def refresh(self, dt: DynamicTable, request: RefreshRequest) -> RefreshResult:
        return self.pipeline.refresh(dt, request)

    def explain(self, dt: DynamicTable) -> str:
        return self.pipeline.explain(dt)

    def verify(self, dt: DynamicTable, mode: str) -> DvsCheck:
        return self.pipeline.verify(dt, mode)
