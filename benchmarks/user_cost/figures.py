"""The figures the goals, the tables and the plot read from the results: medians of the headline's
INCREMENTAL and of NO_DATA, the first DT of a process, the sweep's ratios, the history's trend."""

from __future__ import annotations

import statistics
from typing import Callable, Dict, List, Optional, Tuple

from benchmarks.common import ms
from benchmarks.data import SHAPES
from benchmarks.user_cost.parameters import (
    AFTER_ONE,
    HEADLINE,
    HEADLINE_MODELS,
    HISTORY_MODELS,
    INSERTED,
    SWEEP_FRACTION,
    dt_model,
)
from benchmarks.user_cost.results import HistoryState, Measure, Results

EMBEDDED = "embedded"


def headline_incremental(
    r: Results, engine: str, rows: int, via: str = "dbt", history: str = AFTER_ONE
) -> Optional[float]:
    """The median INCREMENTAL of the headline's copies after an insert."""
    return r.median(engine, rows, via, "incremental", history, HEADLINE_MODELS, "INCREMENTAL")


def no_data(
    r: Results, engine: str, rows: int, via: str = "dbt", history: str = AFTER_ONE
) -> Optional[float]:
    """The median NO_DATA of every DT in the runs with no change."""
    return r.median(engine, rows, via, "no-data", history, None, "NO_DATA")


def first_no_data(
    r: Results, engine: str, rows: int, via: str = "dbt", history: str = AFTER_ONE
) -> Optional[Measure]:
    """The first DT of each process with no change: the one of median time."""
    firsts = sorted(
        (m for m in r.pick(engine, rows, via, "no-data", history) if m.first), key=lambda m: m.seconds
    )
    return firsts[(len(firsts) - 1) // 2] if firsts else None


def history_kinds(r: Results, rows: int) -> List[Tuple[str, Callable[[str], Optional[float]]]]:
    """The history comparison's figures at ``rows``, by kind: the history state → the median
    `dbt run` time of the history DTs."""
    return [
        ("NO_DATA", lambda h: r.median(EMBEDDED, rows, "dbt", "no-data", h, HISTORY_MODELS, "NO_DATA")),
        (
            "INCREMENTAL",
            lambda h: r.median(EMBEDDED, rows, "dbt", "incremental", h, HISTORY_MODELS, "INCREMENTAL"),
        ),
    ]


def speedup(ratio: float, target: float) -> str:
    """``ratio`` to one decimal, or two where one would round a miss up to ``target``."""
    text = f"{ratio:.1f}"
    return f"{ratio:.2f}×" if ratio < target <= float(text) else f"{text}×"


def sweep_ratios(r: Results, engine: str, rows: int, via: str) -> Dict[str, Tuple[float, float, float]]:
    """shape → (incremental s, full s, full/incremental) at the 0.1% insert."""
    run = "sweep" if int(rows * SWEEP_FRACTION) != INSERTED else "incremental"
    ratios = {}
    for shape in SHAPES:
        copies = HEADLINE_MODELS if shape == HEADLINE else [dt_model(shape, "incremental")]
        inc = r.median(engine, rows, via, run, AFTER_ONE, copies)
        full = r.median(engine, rows, via, run, AFTER_ONE, [dt_model(shape, "full")])
        if inc and full:
            ratios[shape] = (inc, full, full / inc)
    return ratios


def tick_trend(h: HistoryState, action: str, count: int) -> str:
    times = [s for _, a, s in h.tick_times if a == action]
    if len(times) < 2 * count:
        count = max(1, len(times) // 2)
    if not times:
        return "–"
    return f"{ms(statistics.median(times[:count]))} → {ms(statistics.median(times[-count:]))}"
