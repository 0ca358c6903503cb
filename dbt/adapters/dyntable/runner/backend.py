"""The scheduler's backend on the real refresh service: one engine, one metadata store."""

from __future__ import annotations

from datetime import datetime
from typing import ContextManager, Dict

from dbt.adapters.dyntable.dynamic_table.lifecycle import RefreshRequest, SchedulingState, State, Trigger
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.refresh import RefreshResult
from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService
from dbt.adapters.dyntable.runner.scheduler import DynamicTableState


class ServiceBackend:
    def __init__(self, service: DynamicTableService) -> None:
        self.service = service

    def states(self) -> Dict[str, DynamicTableState]:
        """Data timestamps, scheduling states and failure counts, read fresh for each tick so a
        `dyntable suspend|resume` or a `dbt run` from another process is seen at once."""
        metadata = self.service.metadata
        frontiers = metadata.frontiers()
        graph = metadata.graph()
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

    def refresh(self, dt: DynamicTable, data_timestamp: datetime, trigger: Trigger) -> RefreshResult:
        return self.service.refresh(dt, RefreshRequest(data_timestamp, trigger))

    def record_not_refreshed(
        self, dt: DynamicTable, data_timestamp: datetime, trigger: Trigger, state: State, message: str
    ) -> None:
        self.service.recorder.not_refreshed(dt, data_timestamp, trigger, state, message)

    def record_failure(self, dt: DynamicTable) -> int:
        return self.service.recorder.failed(dt)

    def suspend(self, dt: DynamicTable) -> None:
        self.service.recorder.schedule(dt, SchedulingState.SUSPENDED)

    def batch(self) -> ContextManager[None]:
        return self.service.batch()

    @property
    def interrupted(self) -> bool:
        return self.service.engine.interrupted
