"""The scheduler with a fake clock and a fake refresh backend: ticks, alignment, skips,
UPSTREAM_FAILED, auto-suspend, boundaries, manual refreshes, locks
(docs/ARCHITECTURE.md, "Scheduling")."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta, timezone
from typing import Dict, List

from dbt.adapters.dyntable.dynamic_table.lifecycle import (
    Action,
    RefreshRequest,
    SchedulingState,
    State,
    Trigger,
    from_ms,
    to_ms,
)
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.refresh import RefreshFailed, RefreshResult
from dbt.adapters.dyntable.runner.graph import build_graph
from dbt.adapters.dyntable.runner.scheduler import Outcome, Scheduler
from tests.unit.runner.fakes import FakeBackend, FakeClock, InlineExecutor, name, node

FAILED, SKIPPED, SUCCEEDED = State.FAILED, State.SKIPPED, State.SUCCEEDED
UPSTREAM_FAILED, SUSPENDED, MANUAL = State.UPSTREAM_FAILED, SchedulingState.SUSPENDED, Trigger.MANUAL

S = 1000
UNIT = 48 * S
#: A start that is not on any period boundary.
START = 1_800_000_000.0 + 7.3


def pipeline():
    """raw → orders (1 min, 48 s) → daily (5 min, 96 s); lookup (1 h) across a boundary."""
    return build_graph(
        [
            node("orders", "1 minute"),
            node("enriched", "downstream", reads=["orders"]),
            node("daily", "5 minutes", reads=["enriched"], across=["lookup"]),
            node("lookup", "1 hour"),
        ],
        UNIT,
    )


def states_by(outcomes: List[Outcome]) -> Dict[str, str]:
    return {o.model: o.state for o in outcomes}


def test_run_keeps_every_dt_within_its_period_and_aligns_data_timestamps():
    graph = pipeline()
    backend = FakeBackend()
    clock = FakeClock(START)
    ticks: List[List[Outcome]] = []
    ran = Scheduler(graph, backend).run(
        clock,
        stop_at=START + 20 * 60,
        on_tick=lambda plan, out: ticks.append(out),
        executor=InlineExecutor(),
    )
    assert ran == len(ticks) > 20
    refreshed = defaultdict(list)
    for table, ts, trigger in backend.calls:
        assert trigger == "SCHEDULED"
        refreshed[table].append(to_ms(ts))
    # the first tick catches everything up at once, on the current boundary
    first = int(START * 1000) // UNIT * UNIT
    assert {t for t, stamps in refreshed.items() if stamps[0] == first} == set(graph.nodes)
    # afterwards each DT refreshes exactly on its own period's boundaries
    for table, stamps in refreshed.items():
        period = graph.period_ms[table]
        assert all(s % period == 0 for s in stamps[1:]), table
        assert all(b - a == period for a, b in zip(stamps[1:], stamps[2:])), table
    # DVS alignment: whenever a DT refreshed at T, everything it reads in its pipeline did too
    for table, stamps in refreshed.items():
        for up in graph.nodes[table].upstream:
            assert set(stamps) <= set(refreshed[up]), (table, up)
    # the boundary input keeps its own, slower schedule
    assert len(refreshed[name("lookup")]) == 1
    assert abs(len(refreshed[name("orders")]) - 2 * len(refreshed[name("daily")])) <= 1


def test_downstream_without_consumers_refreshes_only_when_asked():
    graph = build_graph([node("a", "1 minute"), node("lonely", "downstream", reads=["a"])], UNIT)
    backend = FakeBackend()
    Scheduler(graph, backend).run(FakeClock(START), stop_at=START + 600, executor=InlineExecutor())
    assert {t for t, _, _ in backend.calls} == {name("a")}
    scheduler = Scheduler(graph, backend)
    outcomes = scheduler.execute(
        scheduler.dispatch(to_ms(datetime.now(timezone.utc)), MANUAL, roots=[name("lonely")])
    )
    assert states_by(outcomes) == {"a": SUCCEEDED, "lonely": SUCCEEDED}


def test_a_dt_still_refreshing_is_skipped_for_the_next_tick():
    graph = pipeline()
    backend = FakeBackend()
    scheduler = Scheduler(graph, backend)
    t1 = 37_500 * UNIT * 2  # on every boundary of orders and daily
    backend.data_ts[name("lookup")] = from_ms(t1)  # lookup is fresh: not part of these ticks
    slow = scheduler.dispatch(t1)  # its refreshes have not finished when the next tick comes
    assert [graph.model(n) for n in slow.members] == ["orders", "enriched", "daily"]
    t2 = t1 + UNIT
    fast = scheduler.dispatch(t2)
    assert fast.not_run == {name("orders"): (SKIPPED, "its previous refresh is still running")}
    outcomes = scheduler.execute(fast)
    assert states_by(outcomes) == {"orders": SKIPPED}
    assert backend.not_refreshed[0][:3] == (name("orders"), fast.data_timestamp, SKIPPED)
    # the slow tick completes at its own timestamp; the skip cost one data timestamp, no more
    assert set(states_by(scheduler.execute(slow)).values()) == {SUCCEEDED}
    assert backend.data_ts[name("orders")] == slow.data_timestamp
    again = scheduler.execute(scheduler.dispatch(t2 + UNIT))
    assert states_by(again) == {"orders": SUCCEEDED, "enriched": SUCCEEDED, "daily": SUCCEEDED}
    assert backend.failures.get(name("orders"), 0) == 0  # a skip is not a failure


def test_skip_of_an_upstream_skips_its_consumers_at_that_timestamp():
    graph = pipeline()
    backend = FakeBackend()
    scheduler = Scheduler(graph, backend)
    t1 = 37_500 * UNIT * 2
    for table in ("orders", "enriched", "daily"):
        backend.data_ts[name(table)] = from_ms(t1 - 2 * UNIT)
    backend.data_ts[name("lookup")] = from_ms(t1)
    assert scheduler.dispatch(t1 - UNIT).members == [name("orders")]  # still busy at t1
    outcomes = scheduler.execute(scheduler.dispatch(t1))
    assert states_by(outcomes) == {"orders": SKIPPED, "enriched": SKIPPED, "daily": SKIPPED}
    assert "upstream orders did not refresh" in outcomes[1].message
    assert not backend.calls


#: When a DT with a 48 s period that fails at 0 is tried again: 1, 2, 4, 8 periods after each failure.
RETRIES = [0, 1 * UNIT, 3 * UNIT, 7 * UNIT, 15 * UNIT]


def failing_run(graph, backend, scheduler, ticks: int, start_ms: int):
    """The ticks at which a failing 48 s DT is retried (it backs off in between)."""
    return [states_by(scheduler.execute(scheduler.dispatch(start_ms + at))) for at in RETRIES[:ticks]]


def test_failure_marks_downstream_upstream_failed_and_five_failures_suspend():
    graph = pipeline()
    backend = FakeBackend(failing={name("orders")})
    scheduler = Scheduler(graph, backend)
    start = 37_500 * UNIT * 2
    results = failing_run(graph, backend, scheduler, 5, start)
    for result in results:
        assert result["orders"] == FAILED
        if "daily" in result:  # a tick of daily's too (every other one of orders')
            assert result["enriched"] == UPSTREAM_FAILED and result["daily"] == UPSTREAM_FAILED
    assert backend.failures[name("orders")] == 5
    assert backend.scheduling[name("orders")] == SUSPENDED
    # upstream failures do not count against the DTs downstream
    assert backend.failures.get(name("daily"), 0) == 0
    assert name("daily") not in backend.data_ts  # they never advanced past the failure
    upstream_failed = [r for r in backend.not_refreshed if r[2] == UPSTREAM_FAILED]
    with_daily = sum("daily" in result for result in results)
    assert with_daily >= 1 and len(upstream_failed) == 2 * with_daily
    assert "upstream orders failed" in upstream_failed[0][3]

    # suspended: not attempted any more, and its pipeline cannot advance
    calls = len(backend.calls)
    sixth = states_by(scheduler.execute(scheduler.dispatch(start + 32 * UNIT)))
    assert len(backend.calls) == calls
    assert sixth == {"enriched": SKIPPED, "daily": SKIPPED}

    # resume once the cause is fixed: the next due tick refreshes the whole pipeline
    backend.failing.clear()
    backend.resume(name("orders"))
    resumed = states_by(scheduler.execute(scheduler.dispatch(start + 34 * UNIT)))
    assert resumed == {"orders": SUCCEEDED, "enriched": SUCCEEDED, "daily": SUCCEEDED}
    assert backend.failures[name("orders")] == 0


def test_a_failing_dt_backs_off_exponentially_and_says_until_when():
    graph = build_graph([node("a", "1 minute"), node("b", "5 minutes", reads=["a"])], UNIT)
    backend = FakeBackend(failing={name("a")})
    scheduler = Scheduler(graph, backend)
    start = 37_500 * UNIT * 2
    attempts = []
    for tick in range(16):
        for outcome in scheduler.execute(scheduler.dispatch(start + tick * UNIT)):
            if outcome.model == "a":
                attempts.append((tick, outcome.state, outcome.message))
    failed = [tick for tick, state, _ in attempts if state == FAILED]
    assert failed == [at // UNIT for at in RETRIES]  # 1, 2, 4, 8 periods apart
    assert backend.scheduling[name("a")] == SUSPENDED
    # b's ticks need a while it backs off: a is SKIPPED there, with the next attempt named
    waiting = [message for tick, state, message in attempts if state == SKIPPED]
    next_try = from_ms(start + 3 * UNIT)
    assert f"backing off after 2 consecutive failures: next attempt at {next_try:%H:%M:%S} UTC" in waiting
    # a manual refresh is the user's decision: no backoff
    backend.failing.clear()
    backend.resume(name("a"))
    backend.failures[name("a")], backend.failed_at[name("a")] = 3, from_ms(start + 16 * UNIT)
    manual = scheduler.execute(scheduler.dispatch(start + 17 * UNIT, MANUAL, roots=[name("a")]))
    assert states_by(manual) == {"a": SUCCEEDED}


def test_skips_do_not_count_towards_suspension():
    graph = build_graph([node("a", "1 minute")], UNIT)
    backend = FakeBackend(failing={name("a")})
    scheduler = Scheduler(graph, backend)
    start = 37_500 * UNIT * 2
    for at in RETRIES[:4]:
        scheduler.execute(scheduler.dispatch(start + at))
    busy = scheduler.dispatch(start + RETRIES[4])  # a refresh in flight ...
    assert states_by(scheduler.execute(scheduler.dispatch(start + RETRIES[4] + UNIT))) == {"a": SKIPPED}
    assert backend.failures[name("a")] == 4 and name("a") not in backend.scheduling
    outcome = scheduler.execute(busy)[0]  # ... which fails: the fifth consecutive failure
    assert outcome.state == FAILED and outcome.suspended
    assert "suspended after 5 consecutive failures" in outcome.message
    assert "dyntable resume a" in outcome.message


def test_a_boundary_decouples_schedules_and_failures():
    graph = pipeline()
    backend = FakeBackend(failing={name("lookup")})
    scheduler = Scheduler(graph, backend)
    start = 37_500 * 1536 * S  # a boundary of every period, lookup's included
    outcomes = states_by(scheduler.execute(scheduler.dispatch(start)))
    assert outcomes["lookup"] == FAILED
    assert outcomes["daily"] == SUCCEEDED  # reads lookup's last version, failure or not
    later = scheduler.dispatch(start + 2 * UNIT)
    assert name("lookup") not in later.members  # not dragged into daily's ticks


def test_manual_refresh_brings_upstream_dts_to_the_same_new_timestamp():
    graph = pipeline()
    backend = FakeBackend()
    backend.scheduling[name("orders")] = SUSPENDED  # a manual refresh is the user's call
    scheduler = Scheduler(graph, backend)
    now = datetime(2027, 1, 15, 10, 0, 3, 250000, tzinfo=timezone.utc)
    outcomes = scheduler.execute(scheduler.dispatch(to_ms(now), MANUAL, roots=[name("daily")]))
    assert [o.model for o in outcomes] == ["orders", "enriched", "daily"]
    assert {(t, ts, trig) for t, ts, trig in backend.calls} == {
        (name("orders"), now, MANUAL),
        (name("enriched"), now, MANUAL),
        (name("daily"), now, MANUAL),
    }


def test_a_dt_locked_by_another_runner_is_skipped_naming_the_holder():
    graph = build_graph(
        [node("a", "1 minute"), node("b", "downstream", reads=["a"]), node("c", "1 minute", reads=["b"])],
        UNIT,
    )
    holder = "process 4242 on host-1 (dyntable run, since 2027-01-15T10:00:00Z)"
    backend = FakeBackend(locked={name("a"): holder})
    scheduler = Scheduler(graph, backend)
    outcomes = scheduler.execute(scheduler.dispatch(37_500 * UNIT))
    assert states_by(outcomes) == {"a": SKIPPED, "b": SKIPPED, "c": SKIPPED}
    assert holder in outcomes[0].message
    assert backend.failures.get(name("a"), 0) == 0


def test_an_uninitialized_dt_refreshes_at_the_first_tick_then_on_its_period():
    graph = build_graph([node("a", "5 minutes")], UNIT)  # 96 s
    backend = FakeBackend()
    scheduler = Scheduler(graph, backend)
    t0 = 37_500 * 96 * S + UNIT  # between two of a's boundaries
    assert states_by(scheduler.execute(scheduler.dispatch(t0))) == {"a": SUCCEEDED}
    assert scheduler.dispatch(t0 + UNIT).members == [name("a")]  # its next boundary
    old = datetime.fromtimestamp(t0 / 1000, tz=timezone.utc) - timedelta(days=1)
    backend.data_ts[name("a")] = old
    fresh = Scheduler(graph, backend)  # a restarted runner catches up at once
    assert fresh.dispatch(t0).members == [name("a")]


def test_a_stopping_scheduler_starts_no_refresh_and_a_cancelled_one_is_no_failure():
    graph = pipeline()
    backend = FakeBackend()
    scheduler = Scheduler(graph, backend)
    plan = scheduler.dispatch(int(START * 1000), roots=[name("daily")])
    scheduler.stop()  # a signal arrived: the tick decided before it records what it did not start
    outcomes = scheduler.execute(plan)
    assert {o.state for o in outcomes} == {SKIPPED} and backend.calls == []
    assert all("the runner was stopping" in o.message for o in outcomes)
    assert scheduler.refreshing == set()  # nothing left marked busy

    # the engine's statements were cancelled mid-refresh: CANCELLED, never counted as a failure
    backend = FakeBackend(failing={name("orders")}, interrupted=True)
    scheduler = Scheduler(graph, backend)
    outcomes = scheduler.execute(scheduler.dispatch(int(START * 1000), roots=[name("orders")]))
    assert [(o.model, o.state) for o in outcomes] == [("orders", State.CANCELLED)]
    assert backend.failures == {}


class FailingAfterChoosing(FakeBackend):
    """Its refreshes fail as the pipeline's do once they chose INCREMENTAL."""

    def refresh(self, dt: DynamicTable, request: RefreshRequest) -> RefreshResult:
        state = State.CANCELLED if self.interrupted else FAILED
        error = RuntimeError("the delta query failed")
        raise RefreshFailed(dt, Action.INCREMENTAL, "", state, "its incremental refresh failed", error)


def test_a_failed_refresh_reports_the_action_it_had_chosen():
    graph = pipeline()
    for interrupted, state in ((False, FAILED), (True, State.CANCELLED)):
        backend = FailingAfterChoosing(interrupted=interrupted)
        scheduler = Scheduler(graph, backend)
        (outcome,) = scheduler.execute(scheduler.dispatch(int(START * 1000), roots=[name("orders")]))
        assert (outcome.state, outcome.action) == (state, Action.INCREMENTAL)
        assert backend.failures == ({} if interrupted else {name("orders"): 1})
        if not interrupted:
            assert outcome.message == "its incremental refresh failed"


def test_an_outcome_carries_what_the_json_log_needs():
    backend = FakeBackend()
    scheduler = Scheduler(pipeline(), backend)
    (outcome,) = scheduler.execute(scheduler.dispatch(int(START * 1000), MANUAL, roots=[name("orders")]))
    assert (outcome.trigger, outcome.reason, outcome.state) == (MANUAL, "no source changed", SUCCEEDED)
