"""Issue 17's goals, each met ✓ or missed ✗ by what user_cost measured, or not measured."""

from __future__ import annotations

from typing import Callable, Dict, List, Mapping, TypeVar

from benchmarks.common import Goal, millions, ms
from benchmarks.user_cost.figures import (
    EMBEDDED,
    first_no_data,
    headline_incremental,
    history_kinds,
    no_data,
    speedup,
    sweep_ratios,
)
from benchmarks.user_cost.models import models_for
from benchmarks.user_cost.parameters import (
    AFTER_MANY,
    AFTER_ONE,
    AFTER_ONE_IN_TURNS,
    FLAT,
    HAND_WRITTEN,
    HISTORY,
    HISTORY_WITHIN,
    INCREMENTAL_S,
    INSERTED,
    JVM_INCREMENTAL_S,
    JVM_NO_DATA_S,
    JVM_VS_HAND,
    NO_DATA_DBT_RUNS,
    NO_DATA_S,
    SPEEDUP,
)
from benchmarks.user_cost.results import Results

#: How each goal names the way its figures were measured.
VIAS = (("dbt", "`dbt run`"), ("runner", "`dyntable run --once`"))

_Value = TypeVar("_Value")


def per_size(values: Mapping[int, _Value], text: Callable[[_Value], str]) -> str:
    """ "1M: 21 ms, 10M: 18 ms": a figure per fact size."""
    return ", ".join(f"{millions(rows)}: {text(value)}" for rows, value in values.items())


def goal_of(
    goal: str,
    values: Mapping[int, _Value],
    shown: str,
    met: Callable[[Mapping[int, _Value]], bool],
    missing: str = "not measured",
) -> Goal:
    """``goal``, met or missed by ``values`` (``shown``); ``missing`` where there are none."""
    return Goal(goal, shown, met(values)) if values else Goal(goal, missing, None)


def goals(r: Results) -> List[Goal]:
    return no_data_goals(r) + incremental_goals(r) + sweep_goals(r) + history_goals(r) + jvm_goals(r)


def no_data_goals(r: Results) -> List[Goal]:
    """NO_DATA per DT, through dbt and through the runner: every DT's, and the first DT's."""
    result = []
    for via, label in VIAS:
        values = {rows: v for rows in r.sizes if (v := no_data(r, EMBEDDED, rows, via)) is not None}
        firsts = {rows: m for rows in r.sizes if (m := first_no_data(r, EMBEDDED, rows, via)) is not None}
        goal = (
            f"through {label}: NO_DATA ≤ {NO_DATA_S * 1000:.0f} ms per DT (median over the "
            f"{len(models_for(EMBEDDED)) - 1} DTs of a run"
            + (f", {NO_DATA_DBT_RUNS} runs)" if via == "dbt" else ")")
        )
        shown = per_size(values, ms)
        result.append(goal_of(goal, values, shown, lambda v: max(v.values()) <= NO_DATA_S))
        goal = (
            f"through {label}: NO_DATA ≤ {NO_DATA_S * 1000:.0f} ms for the first DT of the process "
            "(it pays the process's setup)"
            + (f", the median over {NO_DATA_DBT_RUNS} runs" if via == "dbt" else "")
        )
        shown = per_size(firsts, lambda m: f"{ms(m.seconds)} ({m.model})")
        result.append(goal_of(goal, firsts, shown, lambda v: max(m.seconds for m in v.values()) <= NO_DATA_S))
    return result


def incremental_goals(r: Results) -> List[Goal]:
    """INCREMENTAL of 1,000 rows into the join + group-by DT: at 10M rows, and flat with size."""
    result = []
    at_10m = 10_000_000
    for via, label in VIAS:
        values = {
            rows: v for rows in r.sizes if (v := headline_incremental(r, EMBEDDED, rows, via)) is not None
        }
        shown = per_size(values, ms)
        goal = (
            f"through {label}: INCREMENTAL of {INSERTED:,} inserted rows into the join + group-by DT "
            f"≤ {INCREMENTAL_S * 1000:.0f} ms at 10M rows"
        )
        if at_10m in values:
            result.append(Goal(goal, shown, values[at_10m] <= INCREMENTAL_S))
        else:
            result.append(Goal(goal, f"not measured at 10M rows ({shown or 'no size run'})", None))
        goal = f"through {label}: that INCREMENTAL flat (≤ {FLAT}×) from 1M to 100M rows"
        if len(values) > 1:
            smallest, largest = min(values), max(values)
            growth = values[largest] / values[smallest]
            shown = f"{growth:.2f}× from {millions(smallest)} to {millions(largest)}" + (
                "" if largest >= 100_000_000 else " (quick profile: 100M is --full's)"
            )
            result.append(Goal(goal, shown, growth <= FLAT))
        else:
            result.append(Goal(goal, "not measured: fewer than two sizes", None))
    return result


def sweep_goals(r: Results) -> List[Goal]:
    """The insert-only 0.1% sweep, through dbt and in-process: INCREMENTAL against its FULL twin."""
    result = []
    for rows, target in SPEEDUP.items():
        for via, label in (("dbt", "through `dbt run`"), ("in-process", "in-process")):
            ratios = sweep_ratios(r, EMBEDDED, rows, via) if rows in r.sizes else {}
            goal = (
                f"insert-only 0.1% at {millions(rows)} rows, {label}: "
                f"INCREMENTAL ≥ {target}× faster than FULL"
            )
            if not ratios:
                result.append(
                    Goal(goal, f"not measured: {millions(rows)} rows is the --full profile's", None)
                )
                continue
            shown = ", ".join(f"{s} {speedup(x, target)}" for s, (_, _, x) in ratios.items())
            result.append(Goal(goal, shown, all(x >= target for _, _, x in ratios.values())))
    return result


def history_goals(r: Results) -> List[Goal]:
    """After 1,000 earlier refreshes, against a copy of the project after one, run in turns."""
    result = []
    for index, kind in enumerate(("NO_DATA", "INCREMENTAL")):
        pairs = {}
        for rows in r.history_sizes:
            value_of = history_kinds(r, rows)[index][1]
            before, after = value_of(AFTER_ONE_IN_TURNS), value_of(AFTER_MANY)
            if before and after:
                pairs[rows] = (before, after)
        goal = (
            f"through `dbt run`, after {HISTORY:,} earlier refreshes: {kind} of the join + group-by DT "
            f"within {HISTORY_WITHIN}× of its cost after one (a copy of the project after one, run in turns)"
        )
        shown = per_size(pairs, lambda p: f"{ms(p[0])} → {ms(p[1])} ({p[1] / p[0]:.2f}×)")
        result.append(
            goal_of(goal, pairs, shown, lambda v: all(b / a <= HISTORY_WITHIN for a, b in v.values()))
        )
    return result


def jvm_goals(r: Results) -> List[Goal]:
    """JVM Spark's INCREMENTAL, against the hand-written merge model, and NO_DATA."""
    goals = [
        f"JVM Spark, through `dbt run`: INCREMENTAL of {INSERTED:,} rows into the join + group-by DT "
        f"≤ {JVM_INCREMENTAL_S:g} s of model time",
        f"JVM Spark: that INCREMENTAL ≤ {JVM_VS_HAND}× the hand-written dbt-spark `merge` model of the "
        "same change, timed in the same `dbt run`",
        f"JVM Spark, through `dbt run`: NO_DATA ≤ {JVM_NO_DATA_S:g} s per DT (median over the run's DTs)",
    ]
    if r.jvm_skipped or not r.jvm_sizes:
        return [Goal(g, f"not measured: {r.jvm_skipped or 'no JVM size run'}", None) for g in goals]
    incs = {k: v for k in r.jvm_sizes if (v := headline_incremental(r, "jvm", k)) is not None}
    hands = {
        k: v
        for k in r.jvm_sizes
        if (v := r.median("jvm", k, "dbt", "incremental", AFTER_ONE, [HAND_WRITTEN])) is not None
    }
    nds = {k: v for k in r.jvm_sizes if (v := no_data(r, "jvm", k)) is not None}
    firsts = {k: first.seconds if (first := first_no_data(r, "jvm", k)) else None for k in r.jvm_sizes}
    both: Dict[int, float] = {k: incs[k] / hands[k] for k in incs if k in hands}
    missing = "not measured (see Failures)"
    return [
        goal_of(goals[0], incs, per_size(incs, ms), lambda v: max(v.values()) <= JVM_INCREMENTAL_S, missing),
        goal_of(
            goals[1],
            both,
            ", ".join(
                f"{millions(k)}: {ratio:.2f}× (DT {ms(incs[k])}, hand-written {ms(hands[k])})"
                for k, ratio in both.items()
            ),
            lambda v: all(ratio <= JVM_VS_HAND for ratio in v.values()),
            missing,
        ),
        goal_of(
            goals[2],
            nds,
            ", ".join(f"{millions(k)}: {ms(v)} (first DT {ms(firsts[k])})" for k, v in nds.items()),
            lambda v: max(v.values()) <= JVM_NO_DATA_S,
            missing,
        ),
    ]
