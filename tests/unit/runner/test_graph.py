"""Effective lags, canonical periods and graph validation (docs/ARCHITECTURE.md, "Scheduling")."""

from __future__ import annotations

import pytest

from dbt.adapters.dyntable.runner.graph import GraphError, build_graph, canonical_period_ms
from tests.unit.runner.fakes import name, node

S = 1000


def mixed_graph(unit_ms: int = 48 * S):
    """orders (1 min) → enriched (downstream) → daily (5 min) → report (downstream, no consumer);
    enriched → hourly (2 hours); lookup (1 hour) read by daily across a boundary."""
    return build_graph(
        [
            node("orders", "1 minute"),
            node("enriched", "downstream", reads=["orders"]),
            node("daily", "5 minutes", reads=["enriched"], across=["lookup"]),
            node("hourly", "2 hours", reads=["enriched"]),
            node("report", "downstream", reads=["daily"]),
            node("lookup", "1 hour"),
        ],
        unit_ms,
    )


def test_canonical_periods_leave_half_the_lag_for_waiting_and_refreshing():
    assert canonical_period_ms(60, 48 * S) == 48 * S  # never below the unit
    assert canonical_period_ms(300, 48 * S) == 96 * S
    assert canonical_period_ms(3600, 48 * S) == 1536 * S
    assert canonical_period_ms(7200, 48 * S) == 3072 * S
    assert canonical_period_ms(10, 2400) == 4800  # --time-scale 0.05


def test_chosen_periods_for_mixed_lags_and_downstream():
    graph = mixed_graph()
    periods = {graph.model(n): p // S if p else None for n, p in graph.period_ms.items()}
    assert periods == {
        "orders": 48,
        "enriched": 96,  # downstream: the smallest of daily (5 min) and hourly (2 h)
        "daily": 96,
        "hourly": 3072,
        "report": None,  # downstream and nobody reads it: refreshed only when asked
        "lookup": 1536,
    }
    assert graph.effective_lag[name("enriched")] == 300
    assert graph.lag_source[name("enriched")] == name("daily")
    # every period is a multiple of its upstreams' (so data timestamps align)
    for n, nd in graph.nodes.items():
        for up in nd.upstream:
            if graph.period_ms[n] and graph.period_ms[up]:
                assert graph.period_ms[n] % graph.period_ms[up] == 0
    assert {graph.model(n) for n in graph.scheduled} == {"orders", "daily", "hourly", "lookup"}
    assert graph.tick_ms == 48 * S


def test_time_scale_shrinks_the_unit():
    graph = mixed_graph(unit_ms=2400)
    assert graph.period_ms[name("orders")] == 2400 * 8  # 1 minute: ≤ 30 s → 19.2 s
    assert graph.tick_ms == 19200


def test_closure_brings_the_pipeline_but_not_what_is_behind_a_boundary():
    graph = mixed_graph()
    assert [graph.model(n) for n in graph.closure([name("daily")])] == ["orders", "enriched", "daily"]


def test_lag_below_an_upstream_lag_is_refused():
    with pytest.raises(
        GraphError,
        match=r"Model 'fast': target_lag 1 minute is below the 1 hour "
        r"of its upstream dynamic table 'slow'",
    ):
        build_graph([node("slow", "1 hour"), node("fast", "1 minute", reads=["slow"])])


def test_lag_check_sees_through_downstream_tables():
    with pytest.raises(GraphError, match="'middle'.*below the 1 hour of its upstream dynamic table 'slow'"):
        build_graph(
            [
                node("slow", "1 hour"),
                node("middle", "downstream", reads=["slow"]),
                node("fast", "1 minute", reads=["middle"]),
            ]
        )


def test_a_boundary_lifts_the_lag_constraint():
    graph = build_graph([node("slow", "1 hour"), node("fast", "1 minute", across=["slow"])])
    assert graph.period_ms[name("fast")] == 48 * S


def test_a_cycle_is_refused_with_its_path():
    with pytest.raises(GraphError, match=r"cycle: .*a → .*b.* → |cycle: .*b → .*a"):
        build_graph([node("a", "1 minute", reads=["b"]), node("b", "1 minute", reads=["a"])])


def test_unknown_model_lists_the_dynamic_tables():
    with pytest.raises(
        GraphError,
        match=r"Unknown dynamic table 'nope'. Dynamic tables in this "
        r"project: daily, enriched, hourly, lookup, orders, report",
    ):
        mixed_graph().by_model("nope")
    assert mixed_graph().by_model("s.daily").model == "daily"
