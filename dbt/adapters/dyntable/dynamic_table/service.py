"""Dynamic tables on one engine: its metadata store, refresh locks and refresh pipeline.

The adapter (for the materialization) and the `dyntable` runner each hold one, so there is exactly
one refresh code path; the connection manager owns the adapter's, as it owns the engine.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional, Union

from dbt.adapters.dyntable.dynamic_table.metadata import MetadataStore
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.refresh import RefreshPipeline, RefreshRequest, RefreshResult
from dbt.adapters.dyntable.dynamic_table.verify import DvsCheck
from dbt.adapters.dyntable.engines.base import Engine
from dbt.adapters.dyntable.engines.warehouse import PersistedTable
from dbt.adapters.dyntable.vocabulary import quote


def metadata_store(
    warehouse: Union[str, Path], metadata_schema: str, history_retention_days: Optional[int] = None
) -> MetadataStore:
    """The metadata tables of ``metadata_schema`` in ``warehouse`` (a path or an object store's
    URL): a folder per schema."""
    return MetadataStore(
        f"{str(warehouse).rstrip('/')}/{metadata_schema.lower()}", metadata_schema, history_retention_days
    )


class DynamicTableService:
    def __init__(
        self,
        engine: Engine,
        warehouse: Union[str, Path],
        metadata_schema: str,
        history_retention_days: Optional[int] = None,
        metadata: Optional[MetadataStore] = None,
    ) -> None:
        """``metadata``: the store of ``metadata_schema``, when the caller opened it already
        (``MetadataStore.prefetch``)."""
        self.engine = engine
        self.metadata = metadata or metadata_store(warehouse, metadata_schema, history_retention_days)
        # A damaged metadata table never stops the refreshes: they repair it and warn.
        self.metadata.repairs = True
        self.metadata.ensure(register=self._register)
        self.pipeline = RefreshPipeline(engine, self.metadata, self.metadata.locks)
        self.recorder = self.pipeline.recorder

    def _register(self, schema: str, table: str, location: str) -> None:
        self.engine.execute(f"CREATE SCHEMA IF NOT EXISTS {quote(schema)}")
        self.engine.execute(
            PersistedTable(schema, table, location).create_statement(self.engine.engine_location(location))
        )

    def open_batch(self) -> None:
        """Start a batch of refreshes (a dbt invocation, a runner tick): their history is
        written at its end (docs/ARCHITECTURE.md, "Metadata tables"), and what the engine
        remembers of the catalog is asked afresh ("Cost of a refresh")."""
        self.engine.forget_catalog()
        self.metadata.open_batch()

    def close_batch(self) -> None:
        self.metadata.close_batch()

    @contextmanager
    def batch(self) -> Iterator[None]:
        self.engine.forget_catalog()
        with self.metadata.batch():
            yield

    def refresh(self, dt: DynamicTable, request: RefreshRequest) -> RefreshResult:
        return self.pipeline.refresh(dt, request)

    def explain(self, dt: DynamicTable) -> str:
        return self.pipeline.explain(dt)

    def verify(self, dt: DynamicTable, mode: str) -> DvsCheck:
        return self.pipeline.verify(dt, mode)
