"""The lag sawtooth drawn from refresh history and the self-contained page."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from dbt.adapters.dyntable.dynamic_table.lifecycle import Action, SchedulingState, State, Trigger
from dbt.adapters.dyntable.dynamic_table.metadata import GraphRow, HistoryRow
from dbt.adapters.dyntable.runner.report import lag_series, render_report

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


def test_report_is_one_self_contained_page():
    page = render_report(
        HISTORY, {"s.a": graph_row("s.a", "1 minute")}, now=(T0 + timedelta(seconds=160)).timestamp()
    )
    assert page.count("<svg") == 2 and "target lag 60.0 s" in page
    assert "<script" not in page and "src=" not in page and 'href="http' not in page
    assert "<td>s.a</td><td>1 minute</td><td>3</td><td>1</td><td>1</td>" in page
