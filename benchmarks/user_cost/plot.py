"""results/user_cost.png: six panels, each one comparison of the report."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Callable, List, Optional, Tuple

from benchmarks.common import millions, pyplot
from benchmarks.data import SHAPES
from benchmarks.user_cost.figures import EMBEDDED, headline_incremental, history_kinds, no_data, sweep_ratios
from benchmarks.user_cost.parameters import (
    AFTER_MANY,
    AFTER_ONE,
    AFTER_ONE_IN_TURNS,
    HAND_WRITTEN,
    HEADLINE,
    HEADLINE_MODELS,
    HISTORY,
    INCREMENTAL_S,
    INSERTED,
    JVM_INCREMENTAL_S,
    JVM_NO_DATA_S,
    NO_DATA_S,
    SPEEDUP,
    dt_model,
)
from benchmarks.user_cost.results import Results

#: A matplotlib Axes (matplotlib is an optional dependency: the bench extra).
Axes = Any


def plot(r: Results, path: Path) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(2, 3, figsize=(17, 9))
    headline_by_size(axes[0][0], r)
    sweep_speedups(axes[0][1], r)
    history_ticks(axes[1][0], r)
    history_through_dbt(axes[1][1], r)
    jvm_against_hand_written(axes[0][2], r)
    model_time_parts(axes[1][2], r)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def headline_by_size(ax: Axes, r: Results) -> None:
    """The headline's INCREMENTAL, its FULL twin and NO_DATA, by fact size, each way measured."""
    series: List[Tuple[str, Callable[[int], Optional[float]], str, str]] = [
        ("INCREMENTAL, dbt", lambda rows: headline_incremental(r, EMBEDDED, rows), "-", "tab:blue"),
        (
            "INCREMENTAL, runner",
            lambda rows: headline_incremental(r, EMBEDDED, rows, "runner"),
            "--",
            "tab:blue",
        ),
        (
            "INCREMENTAL, in-process",
            lambda rows: headline_incremental(r, EMBEDDED, rows, "in-process"),
            ":",
            "tab:blue",
        ),
        (
            "FULL twin, dbt",
            lambda rows: r.median(
                EMBEDDED, rows, "dbt", "incremental", AFTER_ONE, [dt_model(HEADLINE, "full")]
            ),
            "-",
            "tab:red",
        ),
        ("NO_DATA, dbt", lambda rows: no_data(r, EMBEDDED, rows), "-", "tab:green"),
        ("NO_DATA, runner", lambda rows: no_data(r, EMBEDDED, rows, "runner"), "--", "tab:green"),
        ("NO_DATA, in-process", lambda rows: no_data(r, EMBEDDED, rows, "in-process"), ":", "tab:green"),
    ]
    for label, value_at, style, color in series:
        points = [(rows, y) for rows in r.sizes if (y := value_at(rows))]
        if points:
            ax.plot(
                [x for x, _ in points], [y for _, y in points], style, color=color, marker="o", label=label
            )
    ax.axhline(INCREMENTAL_S, color="tab:blue", linewidth=0.8, alpha=0.5)
    ax.axhline(NO_DATA_S, color="tab:green", linewidth=0.8, alpha=0.5)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("fact rows")
    ax.set_ylabel("seconds per DT (thin lines: goals)")
    ax.set_title(f"join + group-by DT, {INSERTED:,} inserted rows; NO_DATA", fontsize=9)
    ax.legend(fontsize=7)


def paired_bars(
    ax: Axes, labels: List[str], left: List[float], right: List[float], names: Tuple[str, str], fontsize: int
) -> None:
    """Two bars per label, ``left`` and ``right``, named ``names`` in the legend."""
    xs = range(len(labels))
    ax.bar([x - 0.2 for x in xs], left, 0.4, label=names[0])
    ax.bar([x + 0.2 for x in xs], right, 0.4, label=names[1])
    ax.set_xticks(list(xs), labels, fontsize=fontsize)


def sweep_speedups(ax: Axes, r: Results) -> None:
    """FULL / INCREMENTAL at the insert-only 0.1%, each shape and size, through dbt and in-process."""
    labels, dbt_values, local_values = [], [], []
    for rows in r.sizes:
        d, p = sweep_ratios(r, EMBEDDED, rows, "dbt"), sweep_ratios(r, EMBEDDED, rows, "in-process")
        for shape in SHAPES:
            labels.append(f"{shape}\n{millions(rows)}")
            dbt_values.append(d[shape][2] if shape in d else 0)
            local_values.append(p[shape][2] if shape in p else 0)
    paired_bars(ax, labels, dbt_values, local_values, ("through dbt", "in-process"), fontsize=6)
    for rows, target in SPEEDUP.items():
        if rows in r.sizes:
            ax.axhline(target, color="gray", linestyle=":", linewidth=1)
    ax.set_ylabel("FULL / INCREMENTAL (dotted: goals)")
    ax.set_title("insert-only 0.1%: how much faster incremental is", fontsize=9)
    ax.legend(fontsize=7)


def history_ticks(ax: Axes, r: Results) -> None:
    """Each tick of the history phase: its refresh time as the history grows."""
    for h in r.histories:
        for action, marker in (("NO_DATA", "."), ("INCREMENTAL", "o")):
            pts = [(n, s) for n, a, s in h.tick_times if a == action]
            if pts:
                ax.plot(
                    [n for n, _ in pts],
                    [s for _, s in pts],
                    marker,
                    markersize=3,
                    label=f"{action}, {millions(h.rows)}",
                )
    ax.set_yscale("log")
    ax.set_xlabel("refreshes of the DT so far")
    ax.set_ylabel("in-process refresh seconds (median of the tick)")
    ax.set_title("history phase: cost per refresh as history grows", fontsize=9)
    ax.legend(fontsize=7)


def history_through_dbt(ax: Axes, r: Results) -> None:
    """The history DTs through dbt, after one refresh and after a thousand."""
    labels, before, after = [], [], []
    for rows in r.history_sizes:
        for kind, value_of in history_kinds(r, rows):
            labels.append(f"{'INCR' if kind == 'INCREMENTAL' else kind}\n{millions(rows)}")
            before.append(value_of(AFTER_ONE_IN_TURNS) or 0)
            after.append(value_of(AFTER_MANY) or 0)
    paired_bars(ax, labels, before, after, (AFTER_ONE_IN_TURNS, AFTER_MANY), fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("dbt model seconds")
    ax.set_title(f"through dbt: join + group-by DTs after 1 vs after {HISTORY:,} refreshes", fontsize=9)
    ax.legend(fontsize=7)


def jvm_against_hand_written(ax: Axes, r: Results) -> None:
    """JVM Spark: the headline's INCREMENTAL and NO_DATA beside the hand-written merge model."""
    labels, values, colors = [], [], []
    for rows in r.jvm_sizes:
        for label, value, color in (
            ("DT INCR", headline_incremental(r, "jvm", rows), "tab:blue"),
            (
                "merge model",
                r.median("jvm", rows, "dbt", "incremental", AFTER_ONE, [HAND_WRITTEN]),
                "tab:orange",
            ),
            ("DT NO_DATA", no_data(r, "jvm", rows), "tab:green"),
        ):
            labels.append(f"{label}\n{millions(rows)}")
            values.append(value or 0)
            colors.append(color)
    if labels:
        ax.bar(range(len(labels)), values, color=colors)
        ax.set_xticks(list(range(len(labels))), labels, fontsize=7)
        ax.axhline(JVM_INCREMENTAL_S, color="tab:blue", linewidth=0.8, alpha=0.5)
        ax.axhline(JVM_NO_DATA_S, color="tab:green", linewidth=0.8, alpha=0.5)
        ax.set_yscale("log")
    else:
        ax.text(0.5, 0.5, "JVM Spark not measured", ha="center", va="center", transform=ax.transAxes)
    ax.set_ylabel("dbt model seconds (thin lines: goals)")
    ax.set_title(f"JVM Spark: join + group-by DT vs hand-written merge, {INSERTED:,} rows", fontsize=9)


def model_time_parts(ax: Axes, r: Results) -> None:
    """A dbt model's time: the refresh, and dbt's materialization around it."""
    labels, inside, around = [], [], []
    for rows in r.sizes:
        for kind, run, action in (("NO_DATA", "no-data", "NO_DATA"), ("INCR", "incremental", "INCREMENTAL")):
            found = [
                (m.seconds, m.refresh)
                for m in r.pick(EMBEDDED, rows, "dbt", run, AFTER_ONE, HEADLINE_MODELS, action)
                if m.refresh
            ]
            if not found:
                continue
            labels.append(f"{kind}\n{millions(rows)}")
            inside.append(statistics.median(refresh for _, refresh in found))
            around.append(statistics.median(total - refresh for total, refresh in found))
    xs = range(len(labels))
    ax.bar(xs, inside, label="the refresh (refresh history)")
    ax.bar(xs, around, bottom=inside, label="dbt around it (materialization, hooks)")
    ax.set_xticks(list(xs), labels, fontsize=7)
    ax.set_ylabel("dbt model seconds (median of the join + group-by DTs)")
    ax.set_title("what a model's time is made of", fontsize=9)
    ax.legend(fontsize=7)
