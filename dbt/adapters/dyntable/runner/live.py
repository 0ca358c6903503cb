"""What the runner's page, its metrics and the static report show of each dynamic table, read
from the metadata tables and, in a running runner, from its scheduler.

A DT's *status* is one word for the graph's colours: SUSPENDED, FAILING (consecutive failures),
OVER TARGET (its lag now exceeds its target lag), ACTIVE, or NOT INITIALIZED (no frontier yet).
Its *lag* is what `dyntable status` shows: now minus its frontier's data timestamp.

:class:`LiveView` reads the tables at most once per ``ttl_seconds`` however many browsers and
scrapers ask, and only the history of the last ``window_seconds`` (the charts' span): a runner's
history holds days of refreshes.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import Callable, Dict, FrozenSet, List, Mapping, Optional, Sequence

from dbt.adapters.dyntable.dynamic_table.config import TargetLag
from dbt.adapters.dyntable.dynamic_table.lifecycle import SchedulingState
from dbt.adapters.dyntable.dynamic_table.metadata import Frontier, GraphRow, HistoryRow, MetadataStore
from dbt.adapters.dyntable.runner.graph import DynamicTableGraph

#: The charts' span: the history of the last hour.
WINDOW_SECONDS = 3600


class DtStatus(str, Enum):
    ACTIVE = "ACTIVE"
    OVER_TARGET = "OVER TARGET"
    FAILING = "FAILING"
    SUSPENDED = "SUSPENDED"
    NOT_INITIALIZED = "NOT INITIALIZED"

    def __str__(self) -> str:
        return self.value


def target_lag_text(graph: DynamicTableGraph, name: str) -> str:
    """A DT's declared lag, and for ``downstream`` the lag it takes from its consumers."""
    declared = graph.nodes[name].dt.config.target_lag
    if not declared.is_downstream:
        return str(declared)
    effective = graph.effective_lag[name]
    if effective is None:
        return "downstream (no consumer: on demand)"
    return f"downstream → {TargetLag(effective)}"


@dataclass(frozen=True)
class DtView:
    """One dynamic table as the page shows it."""

    name: str
    model: str
    status: DtStatus
    scheduling_state: SchedulingState
    consecutive_failures: int
    target_lag: str
    target_lag_seconds: Optional[int]
    lag_seconds: Optional[float]
    data_timestamp: Optional[datetime]
    period_seconds: Optional[float]
    refreshing: bool = False
    last: Optional[HistoryRow] = None


@dataclass(frozen=True)
class Snapshot:
    """Every DT of the graph at one moment, and the recent history of each."""

    taken_at: float
    """Epoch seconds."""
    graph: DynamicTableGraph
    dts: Dict[str, DtView]
    """In dependency order."""
    history: Dict[str, List[HistoryRow]] = field(default_factory=dict)
    """Per DT, the rows of the window, oldest first."""


def dt_status(
    scheduling: SchedulingState, failures: int, lag: Optional[float], target: Optional[int]
) -> DtStatus:
    if scheduling is SchedulingState.SUSPENDED:
        return DtStatus.SUSPENDED
    if failures > 0:
        return DtStatus.FAILING
    if lag is None:
        return DtStatus.NOT_INITIALIZED
    if target is not None and lag > target:
        return DtStatus.OVER_TARGET
    return DtStatus.ACTIVE


def build_snapshot(
    graph: DynamicTableGraph,
    frontiers: Mapping[str, Frontier],
    graph_rows: Mapping[str, GraphRow],
    history: Sequence[HistoryRow],
    now: float,
    refreshing: FrozenSet[str] = frozenset(),
) -> Snapshot:
    by_name: Dict[str, List[HistoryRow]] = {name: [] for name in graph.order}
    for refresh in history:
        if refresh.name in by_name:
            by_name[refresh.name].append(refresh)
    dts: Dict[str, DtView] = {}
    for name in graph.order:
        frontier, row = frontiers.get(name), graph_rows.get(name)
        stamp = frontier.data_timestamp if frontier is not None else None
        lag = now - stamp.timestamp() if stamp is not None else None
        scheduling = row.scheduling_state if row is not None else SchedulingState.ACTIVE
        failures = row.consecutive_failures if row is not None else 0
        target = graph.effective_lag[name]
        period = graph.period_ms[name]
        dts[name] = DtView(
            name=name,
            model=graph.model(name),
            status=dt_status(scheduling, failures, lag, target),
            scheduling_state=scheduling,
            consecutive_failures=failures,
            target_lag=target_lag_text(graph, name),
            target_lag_seconds=target,
            lag_seconds=lag,
            data_timestamp=stamp,
            period_seconds=period / 1000 if period is not None else None,
            refreshing=name in refreshing,
            last=by_name[name][-1] if by_name[name] else None,
        )
    return Snapshot(now, graph, dts, by_name)


class LiveView:
    """Snapshots of a project's DTs, read from its metadata tables at most once per
    ``ttl_seconds``; ``refreshing`` names the DTs a runner in this process refreshes now."""

    def __init__(
        self,
        graph: DynamicTableGraph,
        metadata: MetadataStore,
        refreshing: Callable[[], FrozenSet[str]] = frozenset,
        window_seconds: float = WINDOW_SECONDS,
        ttl_seconds: float = 1.0,
    ) -> None:
        self.graph = graph
        self.metadata = metadata
        self.refreshing = refreshing
        self.window_seconds = window_seconds
        self.ttl_seconds = ttl_seconds
        self._lock = threading.Lock()
        self._cached: Optional[Snapshot] = None
        self._listeners: List[Callable[[Snapshot], None]] = []

    def on_snapshot(self, listener: Callable[[Snapshot], None]) -> None:
        """Call ``listener`` with each snapshot read afresh (the metrics count new history rows)."""
        self._listeners.append(listener)

    def snapshot(self, fresh: bool = False) -> Snapshot:
        with self._lock:
            cached = self._cached
            if not fresh and cached is not None and time.time() - cached.taken_at < self.ttl_seconds:
                return cached
            now = time.time()
            since = datetime.fromtimestamp(now - self.window_seconds, tz=timezone.utc)
            history = self.metadata.history(since=since - timedelta(seconds=1))
            snapshot = build_snapshot(
                self.graph,
                self.metadata.frontiers(),
                self.metadata.graph(),
                [row for row in history if row.name in self.graph.nodes],
                now,
                frozenset(self.refreshing()),
            )
            self._cached = snapshot
            for listener in self._listeners:
                listener(snapshot)
            return snapshot

    def forget(self) -> None:
        """Read afresh at the next request (an action changed what the tables say)."""
        with self._lock:
            self._cached = None
