"""`dyntable report`: one self-contained HTML page (inline SVG, no scripts, no network).

Per dynamic table, the lag sawtooth (docs/ARCHITECTURE.md, "Scheduling") drawn from the refresh
history: lag rises one second per second and drops when a refresh commits, from ``end - previous
data timestamp`` (the peak) to ``end - data timestamp`` (the trough); the target lag is a dashed
line. Below it, refresh durations over time, coloured by action.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from dbt.adapters.dyntable.dynamic_table.config import TargetLag
from dbt.adapters.dyntable.dynamic_table.lifecycle import State
from dbt.adapters.dyntable.dynamic_table.metadata import GraphRow, HistoryRow

WIDTH, HEIGHT = 760, 220
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 16, 36
ACTION_COLOURS = {
    "NO_DATA": "#9aa5b1",
    "INCREMENTAL": "#2f855a",
    "FULL": "#2b6cb0",
    "REINITIALIZE": "#6b46c1",
    "FAILED": "#c53030",
}


@dataclass
class LagSeries:
    """A DT's lag over time: (time, lag) corner points of the sawtooth, in epoch seconds."""

    name: str
    target_lag: Optional[int]
    points: List[Tuple[float, float]] = field(default_factory=list)
    durations: List[Tuple[float, float, str]] = field(default_factory=list)
    """(start, seconds, action or FAILED) per refresh that ran."""
    refreshes: int = 0
    failures: int = 0
    skips: int = 0

    @property
    def max_lag(self) -> Optional[float]:
        return max((lag for _, lag in self.points), default=None)

    def share_within_target(self) -> Optional[float]:
        """Share of the charted time the lag stayed at or below the target."""
        if self.target_lag is None or len(self.points) < 2:
            return None
        total = over = 0.0
        for (t0, lag0), (t1, lag1) in zip(self.points, self.points[1:]):
            if t1 <= t0:
                continue  # the vertical drop at a commit
            total += t1 - t0
            # lag rises linearly between corners: the part above target is at the end
            if lag1 > self.target_lag:
                over += min(t1 - t0, lag1 - max(lag0, self.target_lag))
        return 1.0 - over / total if total else None


def _ts(value: Optional[datetime]) -> Optional[float]:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.timestamp()


def lag_series(name: str, history: Iterable[HistoryRow], target_lag: Optional[int], now: float) -> LagSeries:
    series = LagSeries(name, target_lag)
    rows = sorted(history, key=lambda r: _ts(r.refresh_end_time) or 0.0)
    previous_ts: Optional[float] = None
    for row in rows:
        state, start, end = row.state, _ts(row.refresh_start_time), _ts(row.refresh_end_time)
        if state in (State.SKIPPED, State.UPSTREAM_FAILED):
            series.skips += 1
            continue
        if start is not None and end is not None and row.refresh_action:
            series.durations.append(
                (start, end - start, str(State.FAILED if state is State.FAILED else row.refresh_action))
            )
        if state is State.FAILED:
            series.failures += 1
            continue
        data_ts = _ts(row.data_timestamp)
        if state is not State.SUCCEEDED or data_ts is None or end is None:
            continue
        series.refreshes += 1
        if previous_ts is not None:
            series.points.append((end, end - previous_ts))
        if previous_ts is None or data_ts >= previous_ts:
            previous_ts = data_ts
        series.points.append((end, end - previous_ts))
    if previous_ts is not None and series.points and now > series.points[-1][0]:
        series.points.append((now, now - previous_ts))
    return series


def _clock(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%H:%M:%S")


def _seconds(value: float) -> str:
    if value >= 3600:
        return f"{value / 3600:.1f} h"
    if value >= 120:
        return f"{value / 60:.1f} min"
    return f"{value:.1f} s"


class _Frame:
    """Maps (time, value) into the plot area of one chart."""

    def __init__(self, t0: float, t1: float, top_value: float) -> None:
        self.t0, self.t1 = t0, max(t1, t0 + 1e-3)
        self.top_value = max(top_value, 1e-3)

    def x(self, t: float) -> float:
        return LEFT + (t - self.t0) / (self.t1 - self.t0) * (WIDTH - LEFT - RIGHT)

    def y(self, value: float) -> float:
        return HEIGHT - BOTTOM - value / self.top_value * (HEIGHT - TOP - BOTTOM)

    def axes(self, unit_label: str) -> List[str]:
        parts = [
            f'<line x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - RIGHT}" y2="{HEIGHT - BOTTOM}" '
            'stroke="#444"/>',
            f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{HEIGHT - BOTTOM}" stroke="#444"/>',
            f'<text x="8" y="{TOP + 4}" font-size="11" fill="#444">{unit_label}</text>',
        ]
        for i in range(5):
            value = self.top_value * i / 4
            y = self.y(value)
            parts.append(
                f'<line x1="{LEFT - 4}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#eee"/>'
            )
            parts.append(
                f'<text x="{LEFT - 6}" y="{y + 4:.1f}" font-size="10" text-anchor="end" '
                f'fill="#444">{_seconds(value)}</text>'
            )
            t = self.t0 + (self.t1 - self.t0) * i / 4
            parts.append(
                f'<text x="{self.x(t):.1f}" y="{HEIGHT - BOTTOM + 16}" font-size="10" '
                f'text-anchor="middle" fill="#444">{_clock(t)}</text>'
            )
        return parts


def _svg(parts: Sequence[str], label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{html.escape(label)}">'
        + "".join(parts)
        + "</svg>"
    )


def lag_chart(series: LagSeries) -> str:
    if not series.points:
        return '<p class="empty">No successful refresh recorded yet.</p>'
    t0, t1 = series.points[0][0], series.points[-1][0]
    top = max([series.max_lag or 0.0] + ([series.target_lag] if series.target_lag else [])) * 1.15
    frame = _Frame(t0, t1, top)
    parts = frame.axes("lag")
    if series.target_lag is not None:
        y = frame.y(series.target_lag)
        parts.append(
            f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" '
            'stroke="#c53030" stroke-dasharray="6 4"/>'
        )
        parts.append(
            f'<text x="{WIDTH - RIGHT - 4}" y="{y - 4:.1f}" font-size="10" '
            f'text-anchor="end" fill="#c53030">target lag {_seconds(series.target_lag)}</text>'
        )
    path = " ".join(f"{frame.x(t):.1f},{frame.y(lag):.1f}" for t, lag in series.points)
    parts.append(f'<polyline points="{path}" fill="none" stroke="#2b6cb0" stroke-width="1.5"/>')
    return _svg(parts, f"lag of {series.name} over time")


def duration_chart(series: LagSeries) -> str:
    if not series.durations:
        return ""
    t0 = min(start for start, _, _ in series.durations)
    t1 = max(start + seconds for start, seconds, _ in series.durations)
    frame = _Frame(t0, t1, max(seconds for _, seconds, _ in series.durations) * 1.15)
    parts = frame.axes("refresh")
    for start, seconds, action in series.durations:
        colour = ACTION_COLOURS.get(action, "#444")
        x, y = frame.x(start), frame.y(seconds)
        parts.append(
            f'<line x1="{x:.1f}" y1="{frame.y(0):.1f}" x2="{x:.1f}" y2="{y:.1f}" '
            f'stroke="{colour}" stroke-width="2"><title>{html.escape(action)} '
            f"{seconds:.2f} s at {_clock(start)}</title></line>"
        )
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{colour}"/>')
    return _svg(parts, f"refresh durations of {series.name}")


def render_report(
    history: Sequence[HistoryRow],
    graph: Mapping[str, GraphRow],
    now: Optional[float] = None,
    title: str = "dyntable report",
) -> str:
    """The HTML page for every DT found in the refresh history."""
    now = datetime.now(timezone.utc).timestamp() if now is None else now
    by_name: Dict[str, List[HistoryRow]] = {}
    for row in history:
        by_name.setdefault(row.name, []).append(row)
    sections, summary = [], []
    for name in sorted(by_name):
        lag_text = graph[name].target_lag if name in graph else None
        target = TargetLag.parse(lag_text).seconds if lag_text else None
        series = lag_series(name, by_name[name], target, now)
        within = series.share_within_target()
        cells = (
            name,
            lag_text or "?",
            series.refreshes,
            series.failures,
            series.skips,
            _seconds(series.max_lag) if series.max_lag is not None else "-",
            f"{within:.0%}" if within is not None else "-",
        )
        summary.append("<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in cells) + "</tr>")
        legend = " ".join(
            f'<span style="color:{colour}">■ {action}</span>' for action, colour in ACTION_COLOURS.items()
        )
        sections.append(
            f'<section><h2 id="{html.escape(name)}">{html.escape(name)}</h2>'
            f"<h3>Lag over time</h3>{lag_chart(series)}"
            f'<h3>Refresh durations</h3><p class="legend">{legend}</p>{duration_chart(series)}'
            "</section>"
        )
    generated = datetime.fromtimestamp(now, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem; color: #1a202c; }}
table {{ border-collapse: collapse; }}
td, th {{ padding: .25rem .75rem; border-bottom: 1px solid #e2e8f0; text-align: left; }}
section {{ margin-top: 2rem; }} h3 {{ font-size: .95rem; color: #4a5568; margin-bottom: .25rem; }}
.legend {{ font-size: .8rem; }} .empty {{ color: #718096; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p>Generated {generated}. Lag is the time since a dynamic table's data timestamp; it rises one
second per second and drops when a refresh commits.</p>
<table><thead><tr><th>dynamic table</th><th>target lag</th><th>refreshes</th><th>failures</th>
<th>skips</th><th>max lag</th><th>time within target</th></tr></thead>
<tbody>{"".join(summary)}</tbody></table>
{"".join(sections) or '<p class="empty">No refresh recorded yet.</p>'}
</body></html>
"""
