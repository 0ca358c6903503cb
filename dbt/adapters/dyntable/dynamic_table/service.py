"""Dynamic tables on one engine: the one facade the adapter (the materialization, the
``dynamic_table_matches_query`` test, ``dyntable_explain()``) and the ``dyntable`` runner and
commands use (docs/ARCHITECTURE.md, "The path of one refresh").

It holds the engine, the metadata store, the :class:`Recorder` (what refreshes, skips, failures
and scheduling changes write) and the refresh pipeline, so there is exactly one refresh code path;
the connection manager owns the adapter's, as it owns the engine. Its methods are what the scheduler
asks of its backend (:class:`~dbt.adapters.dyntable.runner.scheduler.RefreshBackend`) and what
the adapter's ``@available`` methods and the commands call.
"""

from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Callable, ContextManager, Dict, Iterator, Optional, Sequence, Union

from dbt.adapters.dyntable.dynamic_table.changeset import since_built
from dbt.adapters.dyntable.dynamic_table.lifecycle import (
    DynamicTableState,
    RefreshRequest,
    SchedulingState,
    State,
    Trigger,
)
from dbt.adapters.dyntable.dynamic_table.metadata import MetadataStore, utcnow
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.refresh import RefreshPipeline, RefreshResult, decide, delta_query
from dbt.adapters.dyntable.dynamic_table.refresh.facts import Definition
from dbt.adapters.dyntable.dynamic_table.refresh.pipeline import planned, verified
from dbt.adapters.dyntable.dynamic_table.refresh.record import Recorder
from dbt.adapters.dyntable.dynamic_table.table_features import TableFeatures
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
        self._pipeline = RefreshPipeline(engine, self.metadata, self.metadata.locks)
        self.recorder: Recorder = self._pipeline.recorder
        #: Refresh a DT as a request asks; a failure raises
        #: :class:`~dbt.adapters.dyntable.dynamic_table.refresh.RefreshFailed`. The pipeline's
        #: own method, not a forward to it (docs/ARCHITECTURE.md, "The path of one refresh").
        self.refresh: Callable[[DynamicTable, RefreshRequest], RefreshResult] = self._pipeline.refresh

    def _register(self, schema: str, table: str, location: str) -> None:
        self.engine.execute(f"CREATE SCHEMA IF NOT EXISTS {quote(schema)}")
        self.engine.execute(
            PersistedTable(schema, table, location).create_statement(self.engine.engine_location(location))
        )

    # -- batches ---------------------------------------------------------------------------------

    def open_batch(self) -> None:
        """Start a batch of refreshes (a dbt invocation, a runner tick): their history is
        written at its end (docs/ARCHITECTURE.md, "Metadata tables"), and what the engine
        remembers of the catalog is asked afresh ("Cost of a refresh")."""
        self.engine.forget_catalog()
        self.metadata.open_batch()

    def close_batch(self) -> None:
        self.metadata.close_batch()

    @contextmanager
    def _batch(self) -> Iterator[None]:
        self.engine.forget_catalog()
        with self.metadata.batch():
            yield

    def batch(self) -> ContextManager[None]:
        """A batch as a ``with`` block (a runner tick): :meth:`open_batch` to :meth:`close_batch`."""
        return self._batch()

    # -- refreshing, explaining, verifying -------------------------------------------------------

    def explain(self, dt: DynamicTable) -> str:
        """How ``dt`` refreshes as of its sources' latest versions (what ``dyntable explain``
        and ``dyntable_explain()`` print): the stages up to the delta query, nothing written."""
        definition = Definition(dt.sql, "")
        request = RefreshRequest(utcnow(), Trigger.MANUAL)
        observed = decide.observe(self.engine, self.metadata, dt, definition, None, request)
        report = delta_query.explain(dt, planned(dt, definition, observed))
        features = TableFeatures(self.engine, dt).describe(self.engine.delta_log(dt.name))
        graph = self.metadata.graph(dt.name).get(dt.name)
        changed = since_built(dt.sql, dt.config, self.metadata.frontier(dt.name), graph)
        settings = f"\nsettings changed since the last refresh: {changed}" if changed else ""
        return f"{report}\ntable features: {features}{settings}"

    def verify(self, dt: DynamicTable, mode: str, key: Optional[Sequence[str]] = None) -> DvsCheck:
        """:func:`~dbt.adapters.dyntable.dynamic_table.refresh.pipeline.verified` (``dyntable
        verify``, the ``dynamic_table_matches_query`` test)."""
        return verified(self.engine, self.metadata, dt, mode, key)

    # -- scheduling ------------------------------------------------------------------------------

    def states(self) -> Dict[str, DynamicTableState]:
        """Data timestamps, scheduling states and failure counts, read fresh for each tick so a
        `dyntable suspend|resume` or a `dbt run` from another process is seen at once."""
        frontiers = self.metadata.frontiers()
        graph = self.metadata.graph()
        states: Dict[str, DynamicTableState] = {}
        for name in set(frontiers) | set(graph):
            frontier, row = frontiers.get(name), graph.get(name)
            states[name] = DynamicTableState(
                data_timestamp=frontier.data_timestamp if frontier else None,
                scheduling_state=row.scheduling_state if row else SchedulingState.ACTIVE,
                consecutive_failures=row.consecutive_failures if row else 0,
                failed_at=row.recorded_at if row and row.consecutive_failures else None,
            )
        return states

    def record_not_refreshed(
        self, dt: DynamicTable, data_timestamp: datetime, trigger: Trigger, state: State, message: str
    ) -> None:
        self.recorder.not_refreshed(dt, data_timestamp, trigger, state, message)

    def record_failure(self, dt: DynamicTable) -> int:
        return self.recorder.failed(dt)

    def suspend(self, dt: DynamicTable) -> None:
        self.recorder.schedule(dt, SchedulingState.SUSPENDED)

    @property
    def interrupted(self) -> bool:
        """Whether Ctrl-C or a stopping runner cancelled the engine's statements."""
        return self.engine.interrupted
