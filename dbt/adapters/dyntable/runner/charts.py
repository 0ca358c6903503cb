"""The charts of the live page and of `dyntable report`, as Plotly figures (JSON-ready dicts that
plotly.js draws: the page fetches them, the report embeds them).

* the lineage graph: the DTs and what they read, left to right in layers, each DT coloured by its
  status (:mod:`runner.live`);
* per DT, its lag over time against its target lag: a sawtooth that rises one second per second
  and drops when a refresh commits, from ``end - previous data timestamp`` (the peak) to ``end -
  data timestamp`` (the trough), drawn from the refresh history (docs/ARCHITECTURE.md, "Scheduling");
* per DT, the duration of each refresh, coloured by action.

Axes take one unit (s, min or h) from the largest value, so plotly.js picks round ticks in it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from dbt.adapters.dyntable.dynamic_table.lifecycle import State
from dbt.adapters.dyntable.dynamic_table.metadata import HistoryRow
from dbt.adapters.dyntable.runner.graph import DynamicTableGraph
from dbt.adapters.dyntable.runner.live import DtStatus, Snapshot

Figure = Dict[str, Any]

ACTION_COLOURS = {
    "NO_DATA": "#9aa5b1",
    "INCREMENTAL": "#2f855a",
    "FULL": "#2b6cb0",
    "REINITIALIZE": "#6b46c1",
    "FAILED": "#c53030",
    "CANCELLED": "#d69e2e",
}
STATUS_COLOURS = {
    DtStatus.ACTIVE: "#2f855a",
    DtStatus.OVER_TARGET: "#dd6b20",
    DtStatus.FAILING: "#c53030",
    DtStatus.SUSPENDED: "#718096",
    DtStatus.NOT_INITIALIZED: "#cbd5e0",
}
REFRESHING = "#2b6cb0"
LAG = "#2b6cb0"
TARGET = "#c53030"
EDGE = "#a0aec0"
BOUNDARY = "#dd6b20"
FONT = {"family": "system-ui, sans-serif", "size": 12, "color": "#1a202c"}


@dataclass
class LagSeries:
    """A DT's lag over time: (time, lag) corner points of the sawtooth, in epoch seconds."""

    name: str
    target_lag: Optional[int]
    points: List[Tuple[float, float]] = field(default_factory=list)
    durations: List[Tuple[float, float, str]] = field(default_factory=list)
    """(start, seconds, action, or FAILED or CANCELLED) per refresh that ran."""
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


def epoch(value: Optional[datetime]) -> Optional[float]:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.timestamp()


def lag_series(name: str, history: Iterable[HistoryRow], target_lag: Optional[int], now: float) -> LagSeries:
    series = LagSeries(name, target_lag)
    rows = sorted(history, key=lambda r: epoch(r.refresh_end_time) or 0.0)
    previous_ts: Optional[float] = None
    for row in rows:
        state, start, end = row.state, epoch(row.refresh_start_time), epoch(row.refresh_end_time)
        if state in (State.SKIPPED, State.UPSTREAM_FAILED):
            series.skips += 1
            continue
        if start is not None and end is not None and row.refresh_action:
            shown = str(state) if state in (State.FAILED, State.CANCELLED) else str(row.refresh_action)
            series.durations.append((start, end - start, shown))
        if state is State.FAILED:
            series.failures += 1
            continue
        data_ts = epoch(row.data_timestamp)
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


def seconds_text(value: float) -> str:
    if value >= 3600:
        return f"{value / 3600:.1f} h"
    if value >= 120:
        return f"{value / 60:.1f} min"
    return f"{value:.1f} s"


def time_unit(largest: float) -> Tuple[str, float]:
    """The unit a duration axis reads in (s, min, h) for values up to ``largest`` seconds."""
    if largest >= 2 * 3600:
        return "h", 3600.0
    if largest >= 2 * 60:
        return "min", 60.0
    return "s", 1.0


def _iso(moment: float) -> str:
    """A time for plotly.js's date axis, in UTC (plotly.js shows such a string as it is)."""
    return datetime.fromtimestamp(moment, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _layout(height: int, margin: Dict[str, int]) -> Dict[str, Any]:
    """What every chart's layout shares: white, a legend above the plot, hover on the nearest point."""
    return {
        "height": height,
        "margin": margin,
        "font": FONT,
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "showlegend": True,
        "legend": {"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
        "hovermode": "closest",
    }


def _time_layout(y_title: str, height: int = 240) -> Dict[str, Any]:
    return {
        **_layout(height, {"l": 64, "r": 24, "t": 36, "b": 48}),
        "xaxis": {
            "type": "date",
            "title": {"text": "time (UTC)"},
            "tickformat": "%H:%M:%S",
            "automargin": True,
            "showline": True,
            "linecolor": "#4a5568",
            "gridcolor": "#edf2f7",
        },
        "yaxis": {
            "title": {"text": y_title},
            "rangemode": "tozero",
            "automargin": True,
            "showline": True,
            "linecolor": "#4a5568",
            "gridcolor": "#edf2f7",
            "zeroline": False,
        },
    }


def lag_figure(series: LagSeries) -> Figure:
    """The lag sawtooth and the target lag as a dashed line; no trace without a refresh."""
    largest = max([series.max_lag or 0.0, float(series.target_lag or 0)])
    unit, scale = time_unit(largest)
    data: List[Dict[str, Any]] = []
    if series.points:
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": "lag",
                "x": [_iso(t) for t, _ in series.points],
                "y": [round(lag / scale, 3) for _, lag in series.points],
                "line": {"color": LAG, "width": 2},
                "hovertemplate": f"%{{x}} UTC<br>lag %{{y:.1f}} {unit}<extra></extra>",
            }
        )
    if series.points and series.target_lag is not None:
        ends = [_iso(series.points[0][0]), _iso(series.points[-1][0])]
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"target lag ({seconds_text(series.target_lag)})",
                "x": ends,
                "y": [series.target_lag / scale] * 2,
                "line": {"color": TARGET, "width": 1.5, "dash": "dash"},
                "hoverinfo": "skip",
            }
        )
    return {"data": data, "layout": _time_layout(f"lag ({unit})")}


def duration_figure(series: LagSeries) -> Figure:
    """Each refresh's duration at its start, one marker colour per action."""
    unit, scale = time_unit(max((seconds for _, seconds, _ in series.durations), default=0.0))
    data = []
    for action, colour in ACTION_COLOURS.items():
        points = [(start, seconds) for start, seconds, shown in series.durations if shown == action]
        if not points:
            continue
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": action,
                "x": [_iso(start) for start, _ in points],
                "y": [round(seconds / scale, 4) for _, seconds in points],
                "marker": {"color": colour, "size": 7},
                "hovertemplate": f"{action} at %{{x}} UTC<br>%{{y:.2f}} {unit}<extra></extra>",
            }
        )
    return {"data": data, "layout": _time_layout(f"refresh duration ({unit})", height=200)}


# -- the lineage graph ---------------------------------------------------------------------------


def lineage_edges(graph: DynamicTableGraph) -> Tuple[Set[Tuple[str, str]], Set[Tuple[str, str]]]:
    """(pipeline edges, edges across a refresh boundary) between relation names."""
    edges: Set[Tuple[str, str]] = set()
    boundary: Set[Tuple[str, str]] = set()
    for name, node in graph.nodes.items():
        # A node built without its lineage (unit tests) reads its inputs directly.
        edges |= node.input_edges or {(read, name) for read in node.upstream | node.other_inputs}
        boundary |= {(relation, name) for relation in node.boundary_inputs}
    return edges, boundary


def layered_layout(nodes: Iterable[str], edges: Iterable[Tuple[str, str]]) -> Dict[str, Tuple[float, float]]:
    """Left-to-right layers (a node one right of its furthest input), each ordered by the mean
    position of its inputs so that edges cross little; (x, y) with y from the top down."""
    preds: Dict[str, Set[str]] = {n: set() for n in nodes}
    for src, dst in edges:
        preds.setdefault(src, set())
        preds.setdefault(dst, set()).add(src)
    layer: Dict[str, int] = {}

    def depth(node: str, path: Tuple[str, ...] = ()) -> int:
        if node not in layer:
            inputs = [p for p in preds[node] if p not in path]  # a cycle would not end
            layer[node] = 1 + max((depth(p, path + (node,)) for p in inputs), default=-1)
        return layer[node]

    for node in sorted(preds):
        depth(node)
    columns: Dict[int, List[str]] = {}
    for node in sorted(preds):
        columns.setdefault(layer[node], []).append(node)
    position: Dict[str, float] = {}
    for x in sorted(columns):
        column = columns[x]
        if x > 0:
            column.sort(
                key=lambda n: (
                    sum(position[p] for p in preds[n] if p in position)
                    / max(1, len(preds[n] & set(position)))
                )
            )
        for i, node in enumerate(column):
            position[node] = float(i)
    return {
        node: (float(x), (len(column) - 1) / 2 - i)
        for x, column in columns.items()
        for i, node in enumerate(column)
    }


def graph_figure(snapshot: Snapshot) -> Figure:
    """The DTs and their inputs as in dbt docs' lineage, each DT coloured by its status; a DT
    refreshing now has a blue ring. A click on a DT names it (``customdata``)."""
    graph = snapshot.graph
    edges, boundary = lineage_edges(graph)
    at = layered_layout(graph.nodes, edges | boundary)
    annotations = [_arrow(at[src], at[dst], EDGE) for src, dst in sorted(edges)]
    annotations += [_arrow(at[src], at[dst], BOUNDARY) for src, dst in sorted(boundary)]
    data = [_boundary_line(at[src], at[dst]) for src, dst in sorted(boundary)]
    data.append(_inputs_trace(at, sorted(n for n in at if n not in graph.nodes)))
    data += [_status_trace(snapshot, at, status, colour) for status, colour in STATUS_COLOURS.items()]
    return {"data": data, "layout": _graph_layout(at, annotations)}


def _boundary_line(start: Tuple[float, float], end: Tuple[float, float]) -> Dict[str, Any]:
    """A dotted line across a refresh boundary (its arrowhead is an annotation)."""
    (x0, y0), (x1, y1) = start, end
    return {
        "type": "scatter",
        "mode": "lines",
        "x": [x0, x1],
        "y": [y0, y1],
        "line": {"color": BOUNDARY, "dash": "dot", "width": 1.5},
        "hoverinfo": "skip",
        "showlegend": False,
    }


def _inputs_trace(at: Mapping[str, Tuple[float, float]], inputs: List[str]) -> Dict[str, Any]:
    """The sources and models the DTs read, as hollow circles."""
    return {
        "type": "scatter",
        "mode": "markers+text",
        "name": "source or model",
        "x": [at[n][0] for n in inputs],
        "y": [at[n][1] for n in inputs],
        "text": inputs,
        "textposition": "bottom center",
        "customdata": [[n, "input", n] for n in inputs],
        "marker": {"symbol": "circle", "size": 14, "color": "white", "line": {"color": EDGE, "width": 2}},
        "hovertemplate": "%{text}<extra>read by dynamic tables</extra>",
    }


def _status_trace(
    snapshot: Snapshot, at: Mapping[str, Tuple[float, float]], status: DtStatus, colour: str
) -> Dict[str, Any]:
    """The DTs in ``status``, as squares of its colour (a legend entry even when there are none)."""
    views = [v for v in snapshot.dts.values() if v.status is status]
    return {
        "type": "scatter",
        "mode": "markers+text",
        "name": str(status),
        "x": [at[v.name][0] for v in views],
        "y": [at[v.name][1] for v in views],
        "text": [v.model for v in views],
        "textposition": "bottom center",
        "customdata": [[v.name, "dt", v.model] for v in views],
        "hovertext": [_hover(v.model, v.lag_seconds, v.target_lag, str(status)) for v in views],
        "hovertemplate": "%{hovertext}<extra></extra>",
        "marker": {
            "symbol": "square",
            "size": 22,
            "color": colour,
            "line": {
                "color": [REFRESHING if v.refreshing else "#1a202c" for v in views],
                "width": [4 if v.refreshing else 1 for v in views],
            },
        },
        "visible": True if views else "legendonly",
    }


def _hover(model: str, lag: Optional[float], target: str, status: str) -> str:
    shown = seconds_text(lag) if lag is not None else "-"
    return f"<b>{model}</b><br>{status}<br>lag {shown} (target {target})"


def _arrow(start: Tuple[float, float], end: Tuple[float, float], colour: str) -> Dict[str, Any]:
    return {
        "x": end[0],
        "y": end[1],
        "ax": start[0],
        "ay": start[1],
        "xref": "x",
        "yref": "y",
        "axref": "x",
        "ayref": "y",
        "text": "",
        "showarrow": True,
        "arrowhead": 2,
        "arrowsize": 1.2,
        "arrowwidth": 1.2,
        "arrowcolor": colour,
        "standoff": 13,
        "startstandoff": 10,
    }


def _graph_layout(at: Dict[str, Tuple[float, float]], annotations: List[Dict[str, Any]]) -> Dict[str, Any]:
    xs = [x for x, _ in at.values()] or [0.0]
    ys = [y for _, y in at.values()] or [0.0]
    hidden = {"showgrid": False, "zeroline": False, "showticklabels": False, "fixedrange": True}
    return {
        **_layout(max(260, int(90 * (max(ys) - min(ys) + 1)) + 80), {"l": 10, "r": 10, "t": 36, "b": 10}),
        "xaxis": {**hidden, "range": [min(xs) - 0.6, max(xs) + 0.6]},
        "yaxis": {**hidden, "range": [min(ys) - 0.7, max(ys) + 0.5]},
        "annotations": annotations,
    }
