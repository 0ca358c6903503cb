"""results/user_cost.md: the goals, then a table per comparison, then every model of every run."""

from __future__ import annotations

import statistics
from functools import partial
from typing import Iterable, List, Optional, Tuple

import benchmarks.user_cost
from benchmarks.common import (
    RESULTS,
    docstring_paragraphs,
    markdown_table,
    millions,
    ms,
    seconds,
    write_results,
)
from benchmarks.data import SHAPES
from benchmarks.user_cost.figures import (
    EMBEDDED,
    first_no_data,
    headline_incremental,
    history_kinds,
    no_data,
    sweep_ratios,
    tick_trend,
)
from benchmarks.user_cost.goals import goals
from benchmarks.user_cost.parameters import (
    AFTER_MANY,
    AFTER_ONE,
    AFTER_ONE_IN_TURNS,
    ALONE,
    CHANGE_EVERY,
    COMMIT_ROWS,
    COMMITS,
    DBT_RUNS,
    ENGINES,
    HAND_WRITTEN,
    HEADLINE,
    HEADLINE_COPIES,
    HEADLINE_MODELS,
    HISTORY,
    HISTORY_MODELS,
    HISTORY_NO_DATA_RUNS,
    INSERTED,
    NAME,
    NO_DATA_DBT_RUNS,
    TITLE,
    dt_model,
)
from benchmarks.user_cost.plot import plot
from benchmarks.user_cost.results import Results

Row = Tuple[str, ...]


def median_or_none(values: Iterable[float]) -> Optional[float]:
    found = list(values)
    return statistics.median(found) if found else None


def intro() -> str:
    return "\n\n".join(docstring_paragraphs(benchmarks.user_cost.__doc__, 1, 2, 3))


def report(results: Results, command: str) -> None:
    lines = body(results) + ["", f"![plot]({NAME}.png)"]
    if results.failures:
        lines = ["## Failures", "", *(f"- {f}" for f in results.failures), ""] + lines
    measured = results.when_measured()
    write_results(
        NAME, TITLE, command, intro() + (f"\n\n{measured}" if measured else ""), goals(results), lines
    )
    plot(results, RESULTS / f"{NAME}.png")


def body(r: Results) -> List[str]:
    sections = [
        per_refresh_section(r),
        sweep_section(r),
        history_section(r),
        jvm_section(r),
        every_run_section(r),
    ]
    lines: List[str] = []
    for section in filter(None, sections):
        lines += ([""] if lines else []) + section
    return lines


def heading(title: str, text: str) -> List[str]:
    """A section's title, and what its table shows."""
    return [f"## {title}", "", text, ""]


def per_refresh_section(r: Results) -> List[str]:
    """The headline's INCREMENTAL, FULL and NO_DATA through dbt, the runner and in-process."""
    lines = heading(
        "Per refresh, side by side (embedded engine)",
        "Seconds per DT. *dbt*: the model's `execution_time`; *of which refresh*: the refresh's own "
        "duration in the refresh history (the rest is dbt's materialization around it); *runner*: "
        "`dyntable run --once`, from the refresh history; *in-process*: a DynamicTableService in a warm "
        "process, as in refresh_vs_full.py. INCREMENTAL: the median of the "
        f"{HEADLINE_COPIES} join + group-by DTs after {INSERTED:,} inserted rows (through dbt, over "
        f"{DBT_RUNS} runs, each after its insert); FULL: their "
        "refresh_mode='full' twin in the same run; `--full-refresh`: `dbt run --full-refresh` of one "
        "(REINITIALIZE); NO_DATA: the median over every DT of a run with no change (through dbt, of "
        f"{NO_DATA_DBT_RUNS} runs), and the first DT of the process apart (through dbt, the median over "
        "the runs).",
    )
    table = [
        row
        for rows in r.sizes
        for history in (AFTER_ONE, AFTER_ONE_IN_TURNS, AFTER_MANY)
        if (row := per_refresh_row(r, rows, history)) is not None
    ]
    header = ["fact rows", "history", "INCR dbt", "of which refresh", "INCR runner", "INCR in-process"]
    header += ["FULL dbt", "--full-refresh dbt", "NO_DATA dbt", "of which refresh", "NO_DATA dbt, first DT"]
    header += ["NO_DATA runner", "NO_DATA in-process"]
    return lines + markdown_table(header, table, "ll" + "r" * 11)


def per_refresh_row(r: Results, rows: int, history: str) -> Optional[Row]:
    """A row of :func:`per_refresh_section`; None where the headline has no INCREMENTAL there."""
    inc = r.pick(EMBEDDED, rows, "dbt", "incremental", history, HEADLINE_MODELS, "INCREMENTAL")
    if not inc:
        return None
    nd = r.pick(EMBEDDED, rows, "dbt", "no-data", history, None, "NO_DATA")
    first = first_no_data(r, EMBEDDED, rows, "dbt", history)
    full = r.median(EMBEDDED, rows, "dbt", "incremental", history, [dt_model(HEADLINE, "full")], "FULL")
    return (
        millions(rows),
        history,
        ms(statistics.median(m.seconds for m in inc)),
        ms(median_or_none(m.refresh for m in inc if m.refresh is not None)),
        ms(headline_incremental(r, EMBEDDED, rows, "runner", history)),
        ms(headline_incremental(r, EMBEDDED, rows, "in-process", history)),
        ms(full),
        ms(r.median(EMBEDDED, rows, "dbt", "full-refresh", history, [HEADLINE_MODELS[0]])),
        ms(median_or_none(m.seconds for m in nd)),
        ms(median_or_none(m.refresh for m in nd if m.refresh is not None)),
        f"{ms(first.seconds)}" if first else "–",
        ms(no_data(r, EMBEDDED, rows, "runner", history)),
        ms(no_data(r, EMBEDDED, rows, "in-process", history)),
    )


def sweep_section(r: Results) -> List[str]:
    """Each shape's FULL / INCREMENTAL at the insert-only 0.1%, through dbt and in-process."""
    lines = heading(
        "Insert-only 0.1% sweep: FULL / INCREMENTAL (embedded engine)",
        "Each shape's incremental DT against its refresh_mode='full' twin, refreshed in the same runs "
        f"after the same inserts: each figure the median over {DBT_RUNS} runs (rounds, in-process), "
        f"each after its own insert (at 1M rows the 1,000-row runs); join + group-by over its "
        f"{HEADLINE_COPIES} copies in each.",
    )
    table = []
    for rows in r.sizes:
        dbt_ratios, local = (
            sweep_ratios(r, EMBEDDED, rows, "dbt"),
            sweep_ratios(r, EMBEDDED, rows, "in-process"),
        )
        for shape in SHAPES:
            d, p = dbt_ratios.get(shape), local.get(shape)
            table.append(
                (
                    millions(rows),
                    shape,
                    ms(d[0]) if d else "–",
                    ms(d[1]) if d else "–",
                    f"{d[2]:.1f}×" if d else "–",
                    ms(p[0]) if p else "–",
                    ms(p[1]) if p else "–",
                    f"{p[2]:.1f}×" if p else "–",
                )
            )
    header = ["fact rows", "DT", "INCR dbt", "FULL dbt", "dbt ratio"]
    header += ["INCR in-process", "FULL in-process", "in-process ratio"]
    return lines + markdown_table(header, table, "ll" + "r" * 6)


def history_section(r: Results) -> List[str]:
    """What the history phase left behind, and the history DTs through dbt after it."""
    if not r.histories:
        return []
    lines = heading(
        f"After {HISTORY:,} earlier refreshes",
        f"The runner's Scheduler in this process refreshed the {len(HISTORY_MODELS)} join + group-by DTs "
        f"one tick at a time (one metadata batch per tick) until each had {HISTORY:,} refreshes; before "
        f"every {CHANGE_EVERY}th tick {COMMITS} commits of {COMMIT_ROWS} rows landed on the fact. "
        "State left behind, what a long-running user has (checkpoints: files in each `_delta_log`; "
        "tick times: the refresh in-process, the median of the first and of the last ticks):",
    )
    header = ["fact rows", "ticks", "seconds", "history rows of a DT", "frontier commits", "frontier files"]
    header += ["history files", "fact version", "DT version", "checkpoints"]
    header += ["NO_DATA tick, first 100 → last 100", "INCR tick, first 5 → last 5"]
    states = [
        (
            millions(h.rows),
            h.ticks,
            f"{h.seconds:.0f}",
            h.history_rows,
            h.frontier_commits,
            h.frontier_files,
            h.history_files,
            h.fact_version,
            h.dt_version,
            h.checkpoints,
            tick_trend(h, "NO_DATA", 100),
            tick_trend(h, "INCREMENTAL", 5),
        )
        for h in r.histories
    ]
    lines += markdown_table(header, states, "l" + "r" * 8 + "lrr")
    return lines + history_comparison(r)


def history_comparison(r: Results) -> List[str]:
    lines = [
        "",
        f"Through `dbt run`, the median model time of the {len(HISTORY_MODELS)} join + group-by DTs in "
        f"{HISTORY_NO_DATA_RUNS} (NO_DATA) and {DBT_RUNS} (INCREMENTAL) whole-project runs, after "
        f"{HISTORY:,} earlier refreshes and in a copy of the project taken after one, the two run in "
        "turns (a run of one, then one of the other, the first of the pair alternating):",
        "",
    ]
    table: List[Row] = []
    for rows in r.history_sizes:
        kinds = history_kinds(r, rows)
        kinds.append(
            ("control: the hand-written merge model, same run", partial(hand_written_median, r, rows))
        )
        for kind, value_of in kinds:
            a, b = value_of(AFTER_ONE_IN_TURNS), value_of(AFTER_MANY)
            table.append((millions(rows), kind, ms(a), ms(b), f"{b / a:.2f}×" if a and b else "–"))
    return lines + markdown_table(
        ["fact rows", "action", AFTER_ONE_IN_TURNS, AFTER_MANY, "ratio"], table, "llrrr"
    )


def hand_written_median(r: Results, rows: int, history: str) -> Optional[float]:
    """The hand-written merge model's INCREMENTAL run through dbt: the history comparison's control."""
    return r.median(EMBEDDED, rows, "dbt", "incremental", history, [HAND_WRITTEN])


def jvm_section(r: Results) -> List[str]:
    """JVM Spark: the DTs beside the hand-written merge model, and each alone in its run."""
    title = "JVM Spark (`method: session`)"
    if r.jvm_skipped or not r.jvm_sizes:
        return [f"## {title}", "", f"Not measured: {r.jvm_skipped or 'no size run'}."]
    lines = heading(
        title,
        "The same project with `method: session` and `spark_jars`; the hand-written merge model and "
        "the DTs timed in one `dbt run` after the same insert, where the DTs before it warm the "
        "driver. Then the join + group-by DT and the merge model each alone in a `dbt run "
        "--select` after one more insert of the same size: there each pays a fresh driver's "
        "first Delta statements.",
    )
    header = ["fact rows", "INCR join + group-by", "INCR join", "hand-written merge"]
    header += ["INCR join + group-by, alone in its run", "hand-written merge, alone in its run"]
    header += ["FULL join + group-by", "NO_DATA", "NO_DATA, first DT"]
    header += ["Spark jobs: INCR join + group-by", "Spark jobs: merge model", "Spark jobs: NO_DATA"]
    return lines + markdown_table(header, [jvm_row(r, rows) for rows in r.jvm_sizes], "l" + "r" * 11)


def jvm_row(r: Results, rows: int) -> Row:
    first = first_no_data(r, "jvm", rows)

    def model_time(run: str, model: str) -> str:
        return ms(r.median("jvm", rows, "dbt", run, AFTER_ONE, [model]))

    def jobs(run: str, model: str) -> str:
        found = [m.jobs for m in r.pick("jvm", rows, "dbt", run, AFTER_ONE, [model]) if m.jobs is not None]
        return str(found[0]) if found else "–"

    return (
        millions(rows),
        ms(headline_incremental(r, "jvm", rows)),
        model_time("incremental", dt_model("join", "incremental")),
        model_time("incremental", HAND_WRITTEN),
        model_time(ALONE, HEADLINE_MODELS[0]),
        model_time(ALONE, HAND_WRITTEN),
        model_time("incremental", dt_model(HEADLINE, "full")),
        ms(no_data(r, "jvm", rows)),
        ms(first.seconds) if first else "–",
        jobs("incremental", HEADLINE_MODELS[0]),
        jobs("incremental", HAND_WRITTEN),
        jobs("no-data", HEADLINE_MODELS[0]),
    )


def every_run_section(r: Results) -> List[str]:
    """Every command, and every model's time in every run."""
    lines = heading(
        "Every model of every run",
        "Seconds per model (dbt: execution_time, with the refresh's own duration in brackets and, on JVM "
        "Spark, the Spark jobs it started; runner and in-process: the refresh). Process wall: the whole "
        "command, what the user waits for; load: the machine's 1-min load average when it started (2 cores: "
        "above ~2 other work shared them).",
    )
    commands = [
        (
            inv.engine,
            millions(inv.rows),
            inv.label,
            f"`{inv.command.strip()}`",
            f"{inv.wall:.1f}",
            f"{inv.load:.1f}",
        )
        for inv in r.invocations
    ]
    lines += markdown_table(
        ["engine", "fact rows", "run", "command", "process wall s", "load"], commands, "llllrr"
    )
    lines += [""]
    return lines + markdown_table(
        ["engine", "fact rows", "via", "run", "history", "models in order"], models_in_order(r), "llllll"
    )


def models_in_order(r: Results) -> List[Row]:
    """A row per engine, size, way, run and history state: its models' times in order."""
    table: List[Row] = []
    keys = sorted(
        {(m.engine, m.rows, m.via, m.run, m.history) for m in r.measures},
        key=lambda k: (ENGINES.index(k[0]), k[1], k[4], ["dbt", "runner", "in-process"].index(k[2]), k[3]),
    )
    for engine, rows, via, run, history in keys:
        cells = []
        for m in r.pick(engine, rows, via, run, history):
            own = f" ({seconds(m.refresh)})" if m.refresh is not None else ""
            own += f" [{m.jobs} jobs]" if m.jobs is not None else ""
            cells.append(f"{m.model} {m.action} {seconds(m.seconds)}{own}")
        table.append((engine, millions(rows), via, run, history, "; ".join(cells)))
    return table
