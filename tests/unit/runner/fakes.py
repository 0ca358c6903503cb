"""A fake clock and a fake refresh backend for the pure scheduler tests (no engine involved)."""

from __future__ import annotations

from concurrent.futures import Executor, Future
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, ContextManager, Dict, Iterable, List, Set, Tuple

from dbt.adapters.dyntable.dynamic_table.config import DynamicTableConfig, TargetLag
from dbt.adapters.dyntable.dynamic_table.lifecycle import (
    Action,
    DynamicTableState,
    RefreshRequest,
    SchedulingState,
    State,
    Trigger,
)
from dbt.adapters.dyntable.dynamic_table.locking import RefreshLocked
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.refresh import RefreshResult
from dbt.adapters.dyntable.runner.graph import GraphNode

ACTIVE, SUSPENDED = SchedulingState.ACTIVE, SchedulingState.SUSPENDED

SCHEMA = "s"


def node(model: str, lag: str, reads: Iterable[str] = (), across: Iterable[str] = ()) -> GraphNode:
    """A DT ``s.<model>`` reading DTs ``reads`` in its pipeline and ``across`` a boundary."""
    config = DynamicTableConfig(TargetLag.parse(lag), refresh_mode="full")
    return GraphNode(
        model=model,
        dt=DynamicTable(SCHEMA, model, f"select * from {model}_source", config),
        upstream=frozenset(f"{SCHEMA}.{u}" for u in reads),
        boundary_inputs=frozenset(f"{SCHEMA}.{u}" for u in across),
    )


def name(model: str) -> str:
    return f"{SCHEMA}.{model}"


class FakeClock:
    def __init__(self, start: float) -> None:
        self.moment = start

    def now(self) -> float:
        return self.moment

    def sleep(self, seconds: float) -> None:
        self.moment += seconds


class InlineExecutor(Executor):
    """Runs each tick to completion when it is submitted: ticks never overlap."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller through the future
            future.set_exception(exc)
        return future


@dataclass
class FakeBackend:
    """Refreshes succeed instantly unless the DT is in ``failing`` or ``locked``."""

    failing: Set[str] = field(default_factory=set)
    locked: Dict[str, str] = field(default_factory=dict)
    data_ts: Dict[str, datetime] = field(default_factory=dict)
    scheduling: Dict[str, SchedulingState] = field(default_factory=dict)
    failures: Dict[str, int] = field(default_factory=dict)
    calls: List[Tuple[str, datetime, Trigger]] = field(default_factory=list)
    not_refreshed: List[Tuple[str, datetime, State, str]] = field(default_factory=list)
    failed_at: Dict[str, datetime] = field(default_factory=dict)
    #: Set to stand for an engine whose statements a stopping runner cancelled.
    interrupted: bool = False

    def states(self) -> Dict[str, DynamicTableState]:
        names = set(self.data_ts) | set(self.scheduling) | set(self.failures)
        return {
            n: DynamicTableState(
                self.data_ts.get(n),
                self.scheduling.get(n, ACTIVE),
                self.failures.get(n, 0),
                self.failed_at.get(n),
            )
            for n in names
        }

    def refresh(self, dt: DynamicTable, request: RefreshRequest) -> RefreshResult:
        data_timestamp, trigger = request.data_timestamp, request.trigger
        if dt.name in self.locked:
            raise RefreshLocked(dt.name, self.locked[dt.name])
        self.calls.append((dt.name, data_timestamp, trigger))
        if dt.name in self.failing:
            self.failed_at[dt.name] = data_timestamp  # recorded when the refresh of T failed
            raise RuntimeError("Division by zero in the defining query")
        self.data_ts[dt.name] = data_timestamp
        self.failures[dt.name] = 0
        return RefreshResult(dt.name, Action.NO_DATA, State.SUCCEEDED, "no source changed", data_timestamp)

    def record_not_refreshed(
        self, dt: DynamicTable, data_timestamp: datetime, trigger: Trigger, state: State, message: str
    ) -> None:
        self.not_refreshed.append((dt.name, data_timestamp, state, message))

    def record_failure(self, dt: DynamicTable) -> int:
        self.failures[dt.name] = self.failures.get(dt.name, 0) + 1
        return self.failures[dt.name]

    def suspend(self, dt: DynamicTable) -> None:
        self.scheduling[dt.name] = SUSPENDED

    def batch(self) -> ContextManager[None]:
        return nullcontext()

    def resume(self, table: str) -> None:
        self.scheduling[table] = ACTIVE
        self.failures[table] = 0
