"""The lag sawtooth drawn from refresh history, the charts of the page and the report, and the
self-contained report."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from dbt.adapters.dyntable.dynamic_table.lifecycle import Action, SchedulingState, State, Trigger
from dbt.adapters.dyntable.dynamic_table.metadata import GraphRow, HistoryRow
from dbt.adapters.dyntable.runner.charts import (
    STATUS_COLOURS,
    duration_figure,
    graph_figure,
    lag_figure,
    lag_series,
    layered_layout,
    time_unit,
)
from dbt.adapters.dyntable.runner.graph import build_graph
from dbt.adapters.dyntable.runner.live import DtStatus, build_snapshot, dt_status
from dbt.adapters.dyntable.runner.report import render_report
from tests.unit.runner.fakes import node

T0 = datetime(2027, 1, 15, 10, 0, 0, tzinfo=timezone.utc)


def row(data_s, start_s, end_s, state="SUCCEEDED", action="INCREMENTAL", name="s.a"):
    at = lambda s: T0 + timedelta(seconds=s)  # noqa: E731
    return HistoryRow(
        name=name,
        refresh_id=f"{name}-{start_s}",
        state=State(state),
        refresh_action=Action(action) if action else None,
        refresh_trigger=Trigger.SCHEDULED,
        data_timestamp=at(data_s) if data_s is not None else None,
        refresh_start_time=at(start_s),
        refresh_end_time=at(end_s),
    )


def graph_row(name, lag):
    return GraphRow(
        name=name,
        inputs=[],
        target_lag=lag,
        effective_target_lag_seconds=None,
        scheduling_state=SchedulingState.ACTIVE,
        consecutive_failures=0,
        definition_hash="",
        refresh_mode="auto",
    )


HISTORY = [
    row(0, 1, 3),  # v0 = 0, committed at 3: lag drops to 3
    row(48, 49, 52),  # peak 52 - 0 = 52, trough 52 - 48 = 4
    row(96, 97, 100, state="FAILED", action="FULL"),
    row(96, 97, 97, state="UPSTREAM_FAILED", action=None),
    row(144, 145, 150),  # peak 150 - 48 = 102, trough 6
]


def test_sawtooth_corners_are_peak_and_trough_at_each_commit():
    series = lag_series("s.a", HISTORY, target_lag=60, now=(T0 + timedelta(seconds=160)).timestamp())
    lags = [round(lag) for _, lag in series.points]
    assert lags == [3, 52, 4, 102, 6, 16]
    assert (series.refreshes, series.failures, series.skips) == (3, 1, 1)
    assert [round(d) for _, d, _ in series.durations] == [2, 3, 3, 5]
    assert series.durations[2][2] == "FAILED"
    # lag above 60 s from 108 s (48 + 60) to 150 s: 42 of the 157 s charted
    assert series.share_within_target() == pytest.approx(1 - 42 / 157)


def test_axes_read_in_one_unit_chosen_from_the_largest_value():
    assert time_unit(90) == ("s", 1.0)
    assert time_unit(600) == ("min", 60.0)
    assert time_unit(3 * 3600) == ("h", 3600.0)
    series = lag_series("s.a", HISTORY, target_lag=60, now=(T0 + timedelta(seconds=160)).timestamp())
    figure = lag_figure(series)
    lag, target = figure["data"]
    assert figure["layout"]["yaxis"]["title"]["text"] == "lag (s)"
    assert lag["y"] == [3, 52, 4, 102, 6, 16] and target["y"] == [60, 60]
    assert target["line"]["dash"] == "dash" and target["name"] == "target lag (60.0 s)"
    # the time axis is UTC clock time (plotly.js picks the ticks), titled as such
    assert lag["x"][0] == "2027-01-15 10:00:03.000" and figure["layout"]["xaxis"]["type"] == "date"
    hours = lag_figure(lag_series("s.a", HISTORY, target_lag=4 * 3600, now=T0.timestamp() + 170))
    assert hours["layout"]["yaxis"]["title"]["text"] == "lag (h)" and hours["data"][1]["y"] == [4, 4]
    durations = duration_figure(series)
    assert [trace["name"] for trace in durations["data"]] == ["INCREMENTAL", "FAILED"]


def test_a_dt_status_puts_suspension_then_failures_then_lag():
    assert dt_status(SchedulingState.SUSPENDED, 3, 500, 60) is DtStatus.SUSPENDED
    assert dt_status(SchedulingState.ACTIVE, 1, 5, 60) is DtStatus.FAILING
    assert dt_status(SchedulingState.ACTIVE, 0, 61, 60) is DtStatus.OVER_TARGET
    assert dt_status(SchedulingState.ACTIVE, 0, 60, 60) is DtStatus.ACTIVE
    assert dt_status(SchedulingState.ACTIVE, 0, None, 60) is DtStatus.NOT_INITIALIZED


def test_layers_run_left_to_right_from_what_is_read():
    at = layered_layout(["d"], [("src", "a"), ("a", "b"), ("b", "d"), ("src", "d"), ("other", "c")])
    assert {n: x for n, (x, _) in at.items()} == {"src": 0, "other": 0, "a": 1, "c": 1, "b": 2, "d": 3}
    assert sorted(y for x, y in at.values() if x == 0) == [-0.5, 0.5]  # a layer is centred


GRAPH = build_graph(
    [
        replace(n, other_inputs=frozenset({f"raw.{n.model}_source"}))
        for n in (
            node("a", "1 minute"),
            node("b", "2 minutes", reads=["a"]),
            node("c", "1 hour", across=["b"]),
        )
    ]
)


def test_the_graph_shows_every_dt_coloured_by_status_and_what_they_read():
    snapshot = build_snapshot(
        GRAPH, {}, {"s.b": graph_row("s.b", "2 minutes")}, HISTORY, T0.timestamp(), frozenset({"s.a"})
    )
    figure = graph_figure(snapshot)
    traces = {trace.get("name"): trace for trace in figure["data"]}
    assert traces["source or model"]["text"] == ["raw.a_source", "raw.b_source", "raw.c_source"]
    shown = [text for status in DtStatus for text in traces[str(status)]["text"]]
    assert sorted(shown) == ["a", "b", "c"]
    assert (
        traces[str(DtStatus.NOT_INITIALIZED)]["marker"]["color"] == STATUS_COLOURS[DtStatus.NOT_INITIALIZED]
    )
    refreshing = traces[str(DtStatus.NOT_INITIALIZED)]
    assert refreshing["marker"]["line"]["width"][refreshing["text"].index("a")] == 4  # a refreshes now
    # a → b in the pipeline (an arrow), b ⇢ c across a boundary (dotted)
    assert len(figure["layout"]["annotations"]) == 4 + 1
    assert [t for t in figure["data"] if t.get("line", {}).get("dash") == "dot"]


def test_report_is_one_self_contained_page():
    now = (T0 + timedelta(seconds=160)).timestamp()
    history = [*HISTORY, row(0, 1, 2, state="FAILED", name="s.b", action="FULL")]
    snapshot = build_snapshot(GRAPH, {}, {"s.a": graph_row("s.a", "1 minute")}, history, now)
    page = render_report(snapshot, title="shop report")
    # plotly.js inlined once, from the plotly package; nothing fetched from elsewhere
    assert page.count("<script>") == 1 + 1 + 2 + 1  # plotly.js, the graph, a's two charts, b's durations
    assert "<script src" not in page and "<link" not in page and "<img" not in page
    assert (
        "<td>a</td><td>NOT INITIALIZED</td><td>1 minute</td><td>-</td><td>3</td><td>1</td><td>1</td>" in page
    )
    assert "No successful refresh recorded yet." in page  # b: one FULL refresh, which failed
