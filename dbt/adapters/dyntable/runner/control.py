"""The actions on a dynamic table, one code path each for the CLI and the live page: a manual
refresh (through the scheduler, with the DTs it reads, at a new data timestamp), suspend, resume,
explain; and what the page's /readyz asks.

:class:`Control` is the page's handle on a project: in `dyntable run --ui` the runner's own
scheduler and engine; in `dyntable ui` beside a runner, an engine of its own started at the first
refresh or explain (suspend and resume write the metadata tables only).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Callable, List, Optional, Tuple

from dbt.adapters.dyntable.dynamic_table.lifecycle import SchedulingState, Trigger
from dbt.adapters.dyntable.dynamic_table.refresh.record import Recorder
from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService
from dbt.adapters.dyntable.runner.graph import DynamicTableGraph, GraphError, GraphNode
from dbt.adapters.dyntable.runner.live import LiveView
from dbt.adapters.dyntable.runner.scheduler import Outcome, Scheduler, TickPlan

#: How long /readyz waits for the engine to answer, and how long an answer holds.
PROBE_TIMEOUT_SECONDS = 5.0
PROBE_TTL_SECONDS = 5.0
#: How long a refresh asked of the page waits for the refreshes of its DTs in flight (a runner's
#: tick) before it is recorded SKIPPED, as a tick finding them busy records them.
MANUAL_WAIT_SECONDS = 120.0

OnTick = Callable[[TickPlan, List[Outcome]], None]


class ActionRefused(Exception):
    """An action that cannot be done now; ``status`` is the HTTP status that says why."""

    def __init__(self, message: str, status: int = 409) -> None:
        super().__init__(message)
        self.status = status


def suspend(recorder: Recorder, node: GraphNode) -> str:
    recorder.schedule(node.dt, SchedulingState.SUSPENDED)
    return f"Suspended {node.model}: runners skip it until `dyntable resume {node.model}`."


def resume(recorder: Recorder, node: GraphNode, accept_change: bool = False) -> str:
    recorder.schedule(node.dt, SchedulingState.ACTIVE, accept_change=accept_change)
    accepted = " and applies the change the fuse stopped, whatever its size" if accept_change else ""
    return f"Resumed {node.model}: its next refresh (the next due tick, or dbt run){accepted}."


def manual_refresh(scheduler: Scheduler, node: GraphNode) -> TickPlan:
    """A manual tick of ``node`` and the DTs it reads, now; suspension is not in the way."""
    return scheduler.dispatch(int(time.time() * 1000), trigger=Trigger.MANUAL, roots=[node.name])


class Control:
    def __init__(
        self,
        graph: DynamicTableGraph,
        view: LiveView,
        recorder: Recorder,
        start_service: Callable[[], DynamicTableService],
        on_tick: Optional[OnTick] = None,
        runs_engine: bool = False,
    ) -> None:
        """``runs_engine``: this process runs the scheduler, whose engine :meth:`attach` hands
        over once started (until then the page is not ready, and ``start_service`` refuses)."""
        self.runs_engine = runs_engine
        self.graph = graph
        self.view = view
        self.recorder = recorder
        self._start_service = start_service
        self.on_tick = on_tick
        self.service: Optional[DynamicTableService] = None
        self.scheduler: Optional[Scheduler] = None
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._actions: List[threading.Thread] = []
        self._probed: Tuple[float, bool, str] = (0.0, False, "")

    def attach(self, service: DynamicTableService, scheduler: Scheduler) -> None:
        """The runner's engine and scheduler, once started: the page's actions use them."""
        with self._lock:
            self.service, self.scheduler = service, scheduler

    def _started(self) -> Tuple[DynamicTableService, Scheduler]:
        with self._lock:
            if self.service is None or self.scheduler is None:
                self.service = self._start_service()
                self.scheduler = Scheduler(self.graph, self.service)
            return self.service, self.scheduler

    def node(self, name: str) -> GraphNode:
        try:
            return self.graph.by_model(name)
        except GraphError as exc:
            raise ActionRefused(str(exc), 404) from None

    def _check_running(self) -> None:
        if self.stopping.is_set():
            raise ActionRefused("The runner is stopping.", 503)

    # -- actions ---------------------------------------------------------------------------------

    def refresh(self, name: str) -> str:
        """Start a manual refresh on a thread of its own, once the refreshes of its DTs in flight
        ended; what it did goes to the history (and to ``on_tick``: the runner's log)."""
        node = self.node(name)
        self._check_running()
        _, scheduler = self._started()
        worker = threading.Thread(target=self._refresh, args=(scheduler, node), name="dyntable-manual")
        with self._lock:
            self._actions = [t for t in self._actions if t.is_alive()] + [worker]
        worker.start()
        others = len(self.graph.closure([node.name])) - 1
        reads = f", with the {others} dynamic table{'s' if others != 1 else ''} it reads," if others else ""
        return f"Refreshing {node.model}{reads} at a new data timestamp, after any refresh of them in flight."

    def _refresh(self, scheduler: Scheduler, node: GraphNode) -> None:
        scheduler.wait_until_free([node.name], MANUAL_WAIT_SECONDS)
        if self.stopping.is_set():
            return
        plan = manual_refresh(scheduler, node)
        outcomes = scheduler.execute(plan)
        self.view.forget()
        if self.on_tick is not None:
            self.on_tick(plan, outcomes)

    def suspend(self, name: str) -> str:
        node = self.node(name)
        self._check_running()
        message = suspend(self.recorder, node)
        self.view.forget()
        return message

    def resume(self, name: str) -> str:
        node = self.node(name)
        self._check_running()
        message = resume(self.recorder, node)
        self.view.forget()
        return message

    def explain(self, name: str) -> str:
        node = self.node(name)
        service, _ = self._started()
        return service.explain(node.dt)

    def wait_for_actions(self, timeout: float) -> None:
        """Let the manual refreshes in flight end (a stopping runner), for at most ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._lock:
            running = list(self._actions)
        for worker in running:
            worker.join(max(0.0, deadline - time.monotonic()))

    # -- readiness -------------------------------------------------------------------------------

    def ready(self) -> Tuple[bool, str]:
        """Ready once the manifest is loaded (it is: this exists) and the engine answers; a page
        beside a runner has no engine until an action needs one, and is ready on its metadata."""
        if self.stopping.is_set():
            return False, "stopping"
        self.view.snapshot()  # the metadata tables can be read (MetadataDamaged otherwise)
        if self.service is None and self.runs_engine:
            return False, "manifest loaded; the engine is starting"
        if self.service is None:
            return True, "manifest loaded; no engine started by this process"
        at, ok, why = self._probed
        if time.monotonic() - at > PROBE_TTL_SECONDS:
            ok, why = self._probe(self.service)
            self._probed = (time.monotonic(), ok, why)
        return ok, why

    @staticmethod
    def _probe(service: DynamicTableService) -> Tuple[bool, str]:
        engine = service.engine
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dyntable-probe")
        try:
            pool.submit(lambda: engine.spark.sql("SELECT 1").collect()).result(PROBE_TIMEOUT_SECONDS)
        except FutureTimeout:
            return False, f"the {engine.name} engine did not answer within {PROBE_TIMEOUT_SECONDS:g} s"
        except Exception as exc:  # noqa: BLE001 - any failure means not ready, and says why
            return False, f"the {engine.name} engine does not answer: {exc}"
        finally:
            pool.shutdown(wait=False)
        return True, f"manifest loaded; the {engine.name} engine answers"
