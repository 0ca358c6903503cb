"""How the `dyntable` commands print: the consoles, times and durations as text, and the tables
they show."""

from __future__ import annotations

import os
import sys
import time
from datetime import datetime, timezone
from typing import List, Optional, Sequence, Union

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dbt.adapters.dyntable.dynamic_table.lifecycle import DynamicTableState, SchedulingState, State, from_ms
from dbt.adapters.dyntable.dynamic_table.metadata import GraphRow, HistoryRow
from dbt.adapters.dyntable.runner.graph import DynamicTableGraph
from dbt.adapters.dyntable.runner.live import target_lag_text
from dbt.adapters.dyntable.runner.scheduler import Outcome

PIPED_WIDTH = 160


def _console(stderr: bool = False) -> Console:
    # Piped output (logs, CI) has no width to fit, and rich's 80-column default for it folds
    # every cell of an eight-column table; a terminal or an explicit COLUMNS still decides.
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() or "COLUMNS" in os.environ else PIPED_WIDTH
    return Console(stderr=stderr, width=width)


console = _console()
errors = _console(stderr=True)


def clock_text(moment: Optional[datetime]) -> str:
    """UTC, to the second; the date only when it is not today's."""
    if moment is None:
        return "-"
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    moment = moment.astimezone(timezone.utc)
    today = datetime.now(timezone.utc).date()
    return moment.strftime("%H:%M:%S" if moment.date() == today else "%Y-%m-%d %H:%M:%S")


def seconds_text(seconds: Optional[float]) -> str:
    if seconds is None:
        return "-"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 120:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.1f} s"


def failures_text(graph: DynamicTableGraph, name: str, row: Optional[GraphRow]) -> str:
    """Consecutive failures, and when a backing-off DT is tried next."""
    if row is None or not row.consecutive_failures:
        return "0"
    period = graph.period_ms[name]
    state = DynamicTableState(consecutive_failures=row.consecutive_failures, failed_at=row.recorded_at)
    retry = state.retry_at_ms(period) if period and row.scheduling_state is SchedulingState.ACTIVE else None
    if retry is None or retry <= time.time() * 1000:
        return str(row.consecutive_failures)
    return f"{row.consecutive_failures} (next try {clock_text(from_ms(retry))})"


def verify_text(mode: Optional[str], last: Optional[HistoryRow]) -> str:
    """A DT's ``verify`` mode and how its latest verified refresh compared (docs/ARCHITECTURE.md,
    "Verifying"): ``full: equal``, ``sample: MISMATCH``, ``off``."""
    outcome = ""
    if last is not None and last.verified:
        word = last.verified.split(" (", 1)[0].split(":", 1)[0]
        color = "green" if word == "equal" else "red" if word == "MISMATCH" else "yellow"
        outcome = f": [{color}]{word}[/] at {clock_text(last.data_timestamp)}"
    return f"{mode or 'off'}{outcome}"


def period_text(graph: DynamicTableGraph, name: str) -> str:
    period = graph.period_ms[name]
    return "-" if period is None else seconds_text(period / 1000)


STATE_STYLES = {
    State.SUCCEEDED: "green",
    State.FAILED: "bold red",
    State.UPSTREAM_FAILED: "red",
    State.SKIPPED: "yellow",
    State.CANCELLED: "yellow",
    SchedulingState.SUSPENDED: "magenta",
}


def styled(state: Optional[Union[State, SchedulingState]]) -> str:
    if not state:
        return "-"
    style = STATE_STYLES.get(state)
    return f"[{style}]{state}[/]" if style else str(state)


TIMES_IN_UTC = "times in UTC"


def titled_table(title: str, columns: Sequence[str], caption: Optional[str] = None) -> Table:
    """A table of ``columns`` whose long values fold onto more lines rather than being cut."""
    table = Table(title=title, title_justify="left", show_edge=False, caption=caption, caption_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def outcome_table(title: str, outcomes: List[Outcome]) -> Table:
    table = titled_table(
        title, ("dynamic table", "state", "action", "data timestamp", "seconds", "detail"), TIMES_IN_UTC
    )
    for o in outcomes:
        table.add_row(
            o.model,
            styled(o.state),
            o.action or "-",
            clock_text(o.data_timestamp),
            f"{o.seconds:.2f}",
            escape(o.message),
        )
    return table


def schedule_table(graph: DynamicTableGraph, chosen: List[str]) -> Table:
    table = titled_table(
        "Schedule",
        (
            "dynamic table",
            "target lag",
            "period",
            "refresh mode",
            "reads (pipeline)",
            "reads across a boundary",
        ),
    )
    for name in graph.order:
        node = graph.nodes[name]
        if name not in chosen:
            continue
        table.add_row(
            node.model,
            target_lag_text(graph, name),
            period_text(graph, name),
            node.dt.config.refresh_mode,
            ", ".join(sorted(graph.model(u) for u in node.upstream)) or "-",
            ", ".join(sorted(node.boundary_inputs)) or "-",
        )
    return table
