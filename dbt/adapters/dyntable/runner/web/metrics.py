"""/metrics: the runner in Prometheus' exposition format, through prometheus_client.

Per dynamic table (labels ``name``, ``model``), read at each scrape from the same snapshot as the
page (:class:`runner.live.LiveView`), so the lag is `dyntable status`'s:

* ``dyntable_lag_seconds``, ``dyntable_target_lag_seconds``, ``dyntable_data_timestamp_seconds``,
  ``dyntable_consecutive_failures``, ``dyntable_scheduling_state{state}`` (1 for its state, 0 for
  the other), ``dyntable_refreshing`` (1 while a tick of this runner refreshes it);

counted from the refresh history rows recorded since this process started (by this runner, a
`dbt run` or another process alike):

* ``dyntable_refreshes_total{action, state, trigger}``, ``dyntable_rows_inserted_total``,
  ``dyntable_rows_deleted_total``, ``dyntable_refresh_duration_seconds{action}`` (a histogram);

and, in a runner (`dyntable run --ui`), per runner: ``dyntable_runner_ticks_total``,
``dyntable_runner_skipped_total`` (DTs a tick did not refresh: busy, backing off, an upstream not
refreshed, stopping) and ``dyntable_runner_tick_duration_seconds``.
"""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from typing import Iterator, List, Optional, Set, Tuple

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from dbt.adapters.dyntable.dynamic_table.lifecycle import SchedulingState, State
from dbt.adapters.dyntable.runner.live import LiveView, Snapshot
from dbt.adapters.dyntable.runner.scheduler import Outcome, TickPlan

DURATION_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, float("inf"))
DT_LABELS = ("name", "model")


class SnapshotCollector(Collector):
    """The gauges of each DT, from the view's snapshot at scrape time."""

    def __init__(self, view: LiveView) -> None:
        self.view = view

    def collect(self) -> Iterator[Metric]:
        snapshot = self.view.snapshot()
        lag = GaugeMetricFamily(
            "dyntable_lag_seconds", "Now minus the DT's data timestamp.", labels=DT_LABELS
        )
        target = GaugeMetricFamily(
            "dyntable_target_lag_seconds",
            "The DT's target lag (a downstream DT's: its consumers').",
            labels=DT_LABELS,
        )
        stamp = GaugeMetricFamily(
            "dyntable_data_timestamp_seconds", "The DT's data timestamp, in epoch seconds.", labels=DT_LABELS
        )
        failures = GaugeMetricFamily(
            "dyntable_consecutive_failures", "The DT's consecutive failed refreshes.", labels=DT_LABELS
        )
        scheduling = GaugeMetricFamily(
            "dyntable_scheduling_state", "1 for the DT's scheduling state.", labels=(*DT_LABELS, "state")
        )
        refreshing = GaugeMetricFamily(
            "dyntable_refreshing", "1 while a tick of this runner refreshes the DT.", labels=DT_LABELS
        )
        for view in snapshot.dts.values():
            labels = [view.name, view.model]
            if view.lag_seconds is not None and view.data_timestamp is not None:
                lag.add_metric(labels, view.lag_seconds)
                stamp.add_metric(labels, view.data_timestamp.timestamp())
            if view.target_lag_seconds is not None:
                target.add_metric(labels, view.target_lag_seconds)
            failures.add_metric(labels, view.consecutive_failures)
            for state in SchedulingState:
                scheduling.add_metric([*labels, str(state)], 1.0 if view.scheduling_state is state else 0.0)
            refreshing.add_metric(labels, 1.0 if view.refreshing else 0.0)
        yield from (lag, target, stamp, failures, scheduling, refreshing)


class RefreshCounters:
    """Counters and a histogram fed by the history rows each snapshot finds that no earlier one
    did, recorded since ``started`` (a counter starts at zero with its process)."""

    def __init__(self, registry: CollectorRegistry, started: datetime) -> None:
        self.started = started
        self._seen: Set[Tuple[str, str]] = set()
        self._lock = threading.Lock()
        self.refreshes = Counter(
            "dyntable_refreshes",
            "Refresh history rows recorded since this process started.",
            (*DT_LABELS, "action", "state", "trigger"),
            registry=registry,
        )
        self.inserted = Counter(
            "dyntable_rows_inserted", "Rows refreshes inserted into the DT.", DT_LABELS, registry=registry
        )
        self.deleted = Counter(
            "dyntable_rows_deleted", "Rows refreshes deleted from the DT.", DT_LABELS, registry=registry
        )
        self.duration = Histogram(
            "dyntable_refresh_duration_seconds",
            "How long each refresh that ran took, by its action.",
            (*DT_LABELS, "action"),
            buckets=DURATION_BUCKETS,
            registry=registry,
        )

    def count(self, snapshot: Snapshot) -> None:
        with self._lock:
            keys: Set[Tuple[str, str]] = set()
            for name, rows in snapshot.history.items():
                model = snapshot.graph.model(name)
                for row in rows:
                    key = (row.refresh_id, str(row.refresh_trigger))
                    keys.add(key)
                    if key in self._seen or _aware(row.refresh_end_time) < self.started:
                        continue
                    action = str(row.refresh_action) if row.refresh_action else "NONE"
                    self.refreshes.labels(name, model, action, str(row.state), str(row.refresh_trigger)).inc()
                    if row.state is State.SUCCEEDED:
                        self.inserted.labels(name, model).inc(row.rows_inserted or 0)
                        self.deleted.labels(name, model).inc(row.rows_deleted or 0)
                    if row.refresh_action is not None:
                        seconds = (row.refresh_end_time - row.refresh_start_time).total_seconds()
                        self.duration.labels(name, model, action).observe(max(0.0, seconds))
            # Rows leave the window as it slides, never to come back: only its rows need remembering.
            self._seen = keys


class RunnerCounters:
    """The scheduler's own: ticks, DTs skipped, tick durations."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.ticks = Counter("dyntable_runner_ticks", "Ticks the runner ran.", registry=registry)
        self.skipped = Counter(
            "dyntable_runner_skipped",
            "DTs a tick did not refresh (busy, backing off, an upstream not refreshed, stopping).",
            registry=registry,
        )
        self.tick_duration = Histogram(
            "dyntable_runner_tick_duration_seconds",
            "How long a tick took, from its dispatch to its last refresh.",
            buckets=DURATION_BUCKETS,
            registry=registry,
        )

    def tick(self, plan: TickPlan, outcomes: List[Outcome], seconds: float) -> None:
        self.ticks.inc()
        self.skipped.inc(sum(1 for o in outcomes if o.state is State.SKIPPED))
        self.tick_duration.observe(seconds)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def registry_for(
    view: LiveView, started: datetime, runner: bool
) -> Tuple[CollectorRegistry, Optional[RunnerCounters]]:
    """A registry of this view's metrics (its own: a process may serve two projects' pages), and
    the runner's counters when the process runs the scheduler."""
    registry = CollectorRegistry(auto_describe=True)
    registry.register(SnapshotCollector(view))
    counters = RefreshCounters(registry, started)
    view.on_snapshot(counters.count)
    return registry, RunnerCounters(registry) if runner else None
