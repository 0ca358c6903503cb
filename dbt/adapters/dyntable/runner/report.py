"""`dyntable report`: one self-contained HTML page with the live page's charts
(:mod:`runner.charts`): the lineage graph coloured by status, then per dynamic table its lag over
time against its target lag and its refresh durations. plotly.js is inlined from the plotly
package, so the page opens anywhere, without network.
"""

from __future__ import annotations

import html
import json
from datetime import datetime, timezone
from importlib import resources
from typing import Any, List

from dbt.adapters.dyntable.runner.charts import (
    ACTION_COLOURS,
    Figure,
    LagSeries,
    duration_figure,
    graph_figure,
    lag_figure,
    lag_series,
    seconds_text,
)
from dbt.adapters.dyntable.runner.live import DtView, Snapshot

PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}


def plotly_js() -> bytes:
    """plotly.min.js as the plotly package ships it."""
    return (resources.files("plotly") / "package_data" / "plotly.min.js").read_bytes()


def script_json(value: Any) -> str:
    """``value`` as JSON safe inside a <script> element."""
    return json.dumps(value, separators=(",", ":")).replace("</", "<\\/")


def _chart(element_id: str, figure: Figure) -> str:
    return (
        f'<div class="chart" id="{element_id}"></div><script>Plotly.newPlot("{element_id}", '
        f"{script_json(figure['data'])}, {script_json(figure['layout'])}, {script_json(PLOTLY_CONFIG)});"
        "</script>"
    )


#: The summary table's columns, one cell each in :func:`_summary_row`.
SUMMARY_HEADERS = (
    "dynamic table",
    "status",
    "target lag",
    "lag now",
    "refreshes",
    "failures",
    "skips",
    "max lag",
    "time within target",
)


def render_report(snapshot: Snapshot, title: str = "dyntable report") -> str:
    """The HTML page for every DT of the snapshot's graph, from the history it holds."""
    summary: List[str] = []
    sections: List[str] = []
    for index, view in enumerate(snapshot.dts.values()):
        series = lag_series(
            view.name, snapshot.history.get(view.name, []), view.target_lag_seconds, snapshot.taken_at
        )
        summary.append(_summary_row(view, series))
        sections.append(_section(index, view, series))
    generated = datetime.fromtimestamp(snapshot.taken_at, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    legend = ", ".join(f'<span style="color:{c}">●</span> {a}' for a, c in ACTION_COLOURS.items())
    headers = "".join(f"<th>{h}</th>" for h in SUMMARY_HEADERS)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<script>{plotly_js().decode()}</script>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem; color: #1a202c; max-width: 72rem; }}
table {{ border-collapse: collapse; }}
td, th {{ padding: .25rem .75rem; border-bottom: 1px solid #e2e8f0; text-align: left; }}
section {{ margin-top: 2rem; }} h2 small {{ color: #718096; font-weight: normal; font-size: .8rem; }}
h3 {{ font-size: .95rem; color: #4a5568; margin-bottom: .25rem; }} .empty {{ color: #718096; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p>Generated {generated}. Lag is the time since a dynamic table's data timestamp; it rises one
second per second and drops when a refresh commits. Refresh durations are coloured by action:
{legend}.</p>
<table><thead><tr>{headers}</tr></thead><tbody>{"".join(summary)}</tbody></table>
<h2>Graph</h2>{_chart("graph", graph_figure(snapshot))}
{"".join(sections) or '<p class="empty">This project has no dynamic tables.</p>'}
</body></html>
"""


def _summary_row(view: DtView, series: LagSeries) -> str:
    """A DT's row of the summary table."""
    within = series.share_within_target()
    cells = (
        view.model,
        str(view.status),
        view.target_lag,
        seconds_text(view.lag_seconds) if view.lag_seconds is not None else "-",
        series.refreshes,
        series.failures,
        series.skips,
        seconds_text(series.max_lag) if series.max_lag is not None else "-",
        f"{within:.0%}" if within is not None else "-",
    )
    return "<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in cells) + "</tr>"


def _section(index: int, view: DtView, series: LagSeries) -> str:
    """A DT's section: its lag over time and its refresh durations (charts numbered ``index``)."""
    lag = _chart(f"lag-{index}", lag_figure(series)) if series.points else ""
    durations = _chart(f"durations-{index}", duration_figure(series)) if series.durations else ""
    return (
        f'<section><h2 id="{html.escape(view.name)}">{html.escape(view.model)} '
        f"<small>{html.escape(view.name)}</small></h2><h3>Lag over time</h3>"
        f"{lag or '<p class=empty>No successful refresh recorded yet.</p>'}"
        f"<h3>Refresh durations</h3>{durations or '<p class=empty>No refresh ran yet.</p>'}</section>"
    )
