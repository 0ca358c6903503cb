"""The scheduler: which dynamic tables refresh at which data timestamp, and what happens when one
cannot.

A tick has one data timestamp T, a multiple of the graph's smallest period (docs/ARCHITECTURE.md,
"Scheduling": one constant phase, so periods that are powers of two apart always meet). A scheduled
DT is *due* at T when its data timestamp is older than its own latest period boundary ``floor(T,
period)`` and it has not been attempted for that boundary yet: in a steady run that is exactly "T is
a multiple of its period", and after a restart or a skip it catches up at the next tick instead of
waiting a whole period. Every due DT brings along the DTs it reads in the same pipeline, so one tick
refreshes a closed set of DTs at one T, in dependency order (docs/ARCHITECTURE.md, "The semantics
contract").

What stops a DT from advancing at T (docs/ARCHITECTURE.md, "Scheduling"):

* its previous refresh is still running → SKIPPED (history row), the next refresh covers the gap;
* a DT it reads failed at T → UPSTREAM_FAILED; it was skipped or is suspended → SKIPPED;
* its own refresh fails → FAILED, and it backs off: after n consecutive failures it is next tried
  at the period boundary 2ⁿ⁻¹ periods after the failed one (at most an hour, or one period, apart),
  SKIPPED meanwhile when a tick needs it; the fifth consecutive failure suspends it. Skips and
  upstream failures do not count, a success resets the count;
* the runner is stopping (:meth:`Scheduler.stop`) → SKIPPED, or CANCELLED for a refresh whose
  statements the stop interrupted (docs/ARCHITECTURE.md, "Interrupting a run"): neither counts
  as a failure.

:meth:`Scheduler.dispatch` decides a tick (cheap, on the scheduling thread); :meth:`execute` runs
it (on a worker). Keeping them apart is what lets a slow tick overlap the next one, and what lets
the unit tests drive both sides with a fake clock and a fake backend.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import (
    Callable,
    ContextManager,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Protocol,
    Set,
    Tuple,
    Union,
)

from dbt.adapters.dyntable.dynamic_table.lifecycle import (
    Action,
    DynamicTableState,
    RefreshRequest,
    SchedulingState,
    State,
    Trigger,
    from_ms,
    to_ms,
)
from dbt.adapters.dyntable.dynamic_table.locking import RefreshLocked
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.refresh import RefreshFailed, RefreshResult
from dbt.adapters.dyntable.runner.graph import DynamicTableGraph
from dbt.adapters.dyntable.vocabulary import first_line

#: Seed 003: five consecutive failures suspend a dynamic table.
MAX_CONSECUTIVE_FAILURES = 5


class RefreshBackend(Protocol):
    """What the scheduler asks of dynamic tables: the facade,
    :class:`~dbt.adapters.dyntable.dynamic_table.service.DynamicTableService` (a fake in the unit
    tests)."""

    def states(self) -> Mapping[str, DynamicTableState]: ...

    def refresh(self, dt: DynamicTable, request: RefreshRequest) -> RefreshResult: ...

    def record_not_refreshed(
        self, dt: DynamicTable, data_timestamp: datetime, trigger: Trigger, state: State, message: str
    ) -> None: ...

    def record_failure(self, dt: DynamicTable) -> int: ...

    def suspend(self, dt: DynamicTable) -> None: ...

    def batch(self) -> ContextManager[None]:
        """Group the history rows of one tick into one write."""

    @property
    def interrupted(self) -> bool:
        """Whether the engine's statements were cancelled (a stopping runner): a refresh that
        failed meanwhile was CANCELLED, not FAILED."""


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


@dataclass
class Outcome:
    """What one DT did in one tick."""

    name: str
    model: str
    state: State
    data_timestamp: datetime
    action: Optional[Action] = None
    message: str = ""
    seconds: float = 0.0
    suspended: bool = False
    trigger: Trigger = Trigger.SCHEDULED
    rows_inserted: int = 0
    rows_deleted: int = 0
    reason: str = ""


@dataclass
class TickPlan:
    data_timestamp: datetime
    trigger: Trigger
    members: List[str]
    """Every DT of the tick, in dependency order."""
    not_run: Dict[str, Tuple[Union[State, SchedulingState], str]] = field(default_factory=dict)
    """DTs decided at dispatch not to run: name → (SKIPPED | SUSPENDED, why)."""
    states: Mapping[str, DynamicTableState] = field(default_factory=dict)
    dispatched_at: float = field(default_factory=time.monotonic)
    """When it was decided (``time.monotonic()``): how long a tick took is measured from here."""

    @property
    def tick_ms(self) -> int:
        return to_ms(self.data_timestamp)

    def outcome(
        self,
        name: str,
        model: str,
        state: State,
        message: str,
        seconds: float = 0.0,
        action: Optional[Action] = None,
        suspended: bool = False,
    ) -> Outcome:
        """What DT ``name`` did in this tick, where no refresh result says it."""
        return Outcome(
            name, model, state, self.data_timestamp, action, message, seconds, suspended, self.trigger
        )


class Scheduler:
    def __init__(
        self,
        graph: DynamicTableGraph,
        backend: RefreshBackend,
        selected: Optional[Iterable[str]] = None,
        max_failures: int = MAX_CONSECUTIVE_FAILURES,
    ) -> None:
        self.graph = graph
        self.backend = backend
        self.max_failures = max_failures
        chosen = set(selected) if selected is not None else None
        #: DTs with a schedule of their own that this runner keeps fresh (dependency order).
        self.selected = [n for n in graph.scheduled if chosen is None or n in chosen]
        self._busy: Set[str] = set()
        self._attempted: Dict[str, int] = {}
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)
        #: Set by :meth:`stop`: no refresh starts any more.
        self.stopping = threading.Event()

    def stop(self) -> None:
        """Start no further refresh; the ones in flight go on (a stopping runner)."""
        self.stopping.set()

    @property
    def refreshing(self) -> Set[str]:
        """The DTs a tick of this scheduler is refreshing (or about to) now."""
        with self._lock:
            return set(self._busy)

    def wait_until_free(self, roots: Iterable[str], seconds: float) -> bool:
        """Wait for the refreshes in flight of ``roots`` and the DTs they read to end (a manual
        refresh asked of a running runner), for at most ``seconds``; whether they did."""
        members = set(self.graph.closure(roots))
        with self._freed:
            return self._freed.wait_for(lambda: not self._busy & members, timeout=seconds)

    # -- deciding a tick -------------------------------------------------------------------------

    def boundary_ms(self, name: str, tick_ms: int) -> Optional[int]:
        period = self.graph.period_ms[name]
        return None if period is None else tick_ms - tick_ms % period

    def is_due(self, name: str, tick_ms: int, state: Optional[DynamicTableState]) -> bool:
        boundary = self.boundary_ms(name, tick_ms)
        if boundary is None:
            return False
        if state is not None and state.scheduling_state == SchedulingState.SUSPENDED:
            return False
        if self._attempted.get(name, -1) >= boundary:
            return False
        if self.backing_off_until(name, tick_ms, state) is not None:
            return False
        stamp = state.data_timestamp if state is not None else None
        return stamp is None or to_ms(stamp) < boundary

    def backing_off_until(self, name: str, tick_ms: int, state: Optional[DynamicTableState]) -> Optional[int]:
        """When a failing DT is tried again, if that is after ``tick_ms``."""
        period = self.graph.period_ms[name]
        retry = state.retry_at_ms(period) if state is not None and period is not None else None
        return retry if retry is not None and tick_ms < retry else None

    def _held_back(
        self, name: str, tick_ms: int, state: Optional[DynamicTableState]
    ) -> Optional[Tuple[Union[State, SchedulingState], str]]:
        """Why a scheduled tick does not refresh ``name``: suspended, or backing off."""
        if state is None:
            return None
        if state.scheduling_state == SchedulingState.SUSPENDED:
            return SchedulingState.SUSPENDED, "suspended"
        retry = self.backing_off_until(name, tick_ms, state)
        if retry is None:
            return None
        return State.SKIPPED, (
            f"backing off after {state.consecutive_failures} consecutive failures: "
            f"next attempt at {from_ms(retry):%H:%M:%S} UTC"
        )

    def dispatch(
        self, tick_ms: int, trigger: Trigger = Trigger.SCHEDULED, roots: Optional[Iterable[str]] = None
    ) -> TickPlan:
        """Decide tick ``tick_ms``: its DTs, and those that cannot run (busy, suspended).

        ``roots`` (a manual refresh) replaces the due DTs; suspension is then not in the way:
        asking for a refresh is the user's decision.
        """
        states = self.backend.states()
        scheduled = trigger == Trigger.SCHEDULED
        if roots is None:
            roots = [n for n in self.selected if self.is_due(n, tick_ms, states.get(n))]
        members = self.graph.closure(roots)
        plan = TickPlan(from_ms(tick_ms), trigger, members, states=states)
        with self._lock:
            for name in members:
                state = states.get(name)
                if scheduled:
                    boundary = self.boundary_ms(name, tick_ms)
                    self._attempted[name] = tick_ms if boundary is None else boundary
                why_not = self._held_back(name, tick_ms, state) if scheduled else None
                if why_not is not None:
                    plan.not_run[name] = why_not
                elif name in self._busy:
                    plan.not_run[name] = (State.SKIPPED, "its previous refresh is still running")
                else:
                    self._busy.add(name)
        return plan

    # -- running a tick --------------------------------------------------------------------------

    def execute(
        self, plan: TickPlan, on_outcome: Optional[Callable[[Outcome], None]] = None
    ) -> List[Outcome]:
        with self.backend.batch():
            return self._execute(plan, on_outcome)

    def _execute(self, plan: TickPlan, on_outcome: Optional[Callable[[Outcome], None]]) -> List[Outcome]:
        outcomes: List[Outcome] = []

        def emit(outcome: Outcome) -> None:
            outcomes.append(outcome)
            if on_outcome is not None:
                on_outcome(outcome)

        # DTs that did not reach T in this tick, and how they stopped.
        stalled: Dict[str, Union[State, SchedulingState]] = {}
        for name in plan.members:
            node = self.graph.nodes[name]
            if name in plan.not_run:
                state, message = plan.not_run[name]
                stalled[name] = state
                if state is State.SKIPPED:
                    emit(self._not_refreshed(plan, name, state, message))
                continue
            try:
                blockers = sorted(u for u in node.upstream if u in stalled)
                if self.stopping.is_set():
                    message = "the runner was stopping: not refreshed at this data timestamp"
                    outcome = self._not_refreshed(plan, name, State.SKIPPED, message)
                elif blockers:
                    outcome = self._blocked(plan, name, blockers, stalled)
                else:
                    outcome = self._refresh(plan, name)
            finally:
                with self._lock:
                    self._busy.discard(name)
                    self._freed.notify_all()
            if outcome.state != State.SUCCEEDED:
                stalled[name] = outcome.state
            emit(outcome)
        return outcomes

    def _not_refreshed(
        self, plan: TickPlan, name: str, state: State, message: str, started: Optional[float] = None
    ) -> Outcome:
        """Record that ``name`` did not refresh at the tick's data timestamp, and why; ``started``
        is when its refresh was attempted, if it was."""
        node = self.graph.nodes[name]
        self.backend.record_not_refreshed(node.dt, plan.data_timestamp, plan.trigger, state, message)
        seconds = time.monotonic() - started if started is not None else 0.0
        return plan.outcome(name, node.model, state, message, seconds)

    def _blocked(
        self,
        plan: TickPlan,
        name: str,
        blockers: List[str],
        stalled: Mapping[str, Union[State, SchedulingState]],
    ) -> Outcome:
        failed = [u for u in blockers if stalled[u] in (State.FAILED, State.UPSTREAM_FAILED)]

        def models(names: List[str]) -> str:
            return ", ".join(self.graph.model(u) for u in names)

        if failed:
            state = State.UPSTREAM_FAILED
            message = f"upstream {models(failed)} failed; kept its last consistent version"
        else:
            state = State.SKIPPED
            message = f"upstream {models(blockers)} did not refresh at this data timestamp"
        return self._not_refreshed(plan, name, state, message)

    def _refresh(self, plan: TickPlan, name: str) -> Outcome:
        node = self.graph.nodes[name]
        started = time.monotonic()
        try:
            result = self.backend.refresh(node.dt, RefreshRequest(plan.data_timestamp, plan.trigger))
        except RefreshLocked as exc:
            # Another runner (or dbt run) is refreshing it: that refresh covers this tick.
            return self._not_refreshed(plan, name, State.SKIPPED, str(exc), started)
        except RefreshFailed as failed:
            return self._failed(plan, name, failed, started, failed.action)
        except Exception as exc:  # noqa: BLE001 - a refresh that failed before it started is one too
            return self._failed(plan, name, exc, started, None)
        return Outcome(
            name,
            node.model,
            result.state,
            result.data_timestamp or plan.data_timestamp,
            result.action,
            "; ".join([result.reason or result.message, *result.warnings]),
            time.monotonic() - started,
            trigger=plan.trigger,
            rows_inserted=result.rows_inserted,
            rows_deleted=result.rows_deleted,
            reason=result.reason,
        )

    def _failed(
        self, plan: TickPlan, name: str, exc: Exception, started: float, action: Optional[Action]
    ) -> Outcome:
        """The outcome of a refresh that raised, having chosen ``action``: CANCELLED by a stopping
        runner, else FAILED, suspending the DT at its ``max_failures``-th consecutive failure."""
        node = self.graph.nodes[name]
        if self.backend.interrupted:
            # A stop cancelled its statements: the pipeline recorded it CANCELLED, and it
            # counts as no failure of the DT's (docs/ARCHITECTURE.md, "Interrupting a run").
            message = "cancelled: the runner was stopping"
            return plan.outcome(
                name, node.model, State.CANCELLED, message, time.monotonic() - started, action
            )
        failures = self.backend.record_failure(node.dt)
        message = first_line(exc)
        state = plan.states.get(name)
        suspend = failures >= self.max_failures and (
            state is None or state.scheduling_state != SchedulingState.SUSPENDED
        )
        if suspend:
            self.backend.suspend(node.dt)
            message += (
                f" [suspended after {failures} consecutive failures: fix the cause, then "
                f"`dyntable resume {node.model}`]"
            )
        seconds = time.monotonic() - started
        return plan.outcome(name, node.model, State.FAILED, message, seconds, action, suspend)

    # -- the loop --------------------------------------------------------------------------------

    def run(
        self,
        clock: Clock,
        stop_at: Optional[float] = None,
        once: bool = False,
        on_tick: Optional[Callable[[TickPlan, List[Outcome]], None]] = None,
        executor: Optional[Executor] = None,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> int:
        """Dispatch ticks until ``stop_at`` (epoch seconds) or ``should_stop()``, or ``once`` at the
        current time; wait for the ticks still running; return how many ticks ran."""
        tick = self.graph.tick_ms
        if tick is None or not self.selected:
            return 0
        if once:
            # One tick now, of every DT this runner keeps (not only those due at a period
            # boundary): what is stale is refreshed, the rest records NO_DATA.
            plan = self.dispatch(int(clock.now() * 1000), roots=self.selected)
            outcomes = self.execute(plan)
            if on_tick is not None:
                on_tick(plan, outcomes)
            return 1
        pool = executor or ThreadPoolExecutor(max_workers=4, thread_name_prefix="dyntable-tick")
        running: List["Future[List[Outcome]]"] = []
        ticks = 0

        def work(plan: TickPlan) -> List[Outcome]:
            outcomes = self.execute(plan)
            if on_tick is not None:
                on_tick(plan, outcomes)
            return outcomes

        # The first tick is the current boundary: a runner that starts late catches up at once.
        next_ms = int(clock.now() * 1000) // tick * tick
        try:
            while not should_stop():
                if stop_at is not None and next_ms / 1000 > stop_at:
                    break
                wait = next_ms / 1000 - clock.now()
                if wait > 0:
                    clock.sleep(wait)
                    if should_stop():
                        break
                running.append(pool.submit(work, self.dispatch(next_ms)))
                running = [f for f in running if not f.done() or f.exception() is not None]
                ticks += 1
                # Ticks missed while the machine was busy are not replayed: the due rule catches up.
                next_ms = max(next_ms + tick, int(clock.now() * 1000) // tick * tick)
        finally:
            for future in running:
                future.result()
            if executor is None:
                pool.shutdown(wait=True)
        return ticks
