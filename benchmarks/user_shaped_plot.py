"""The plot of benchmarks/user_shaped.py (results/user_shaped.png): per engine side by side, each
DT's refresh actions after the first build and each round's model time, stacked by action; then
the focused cases' ratios against their goals."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

from benchmarks.common import pyplot
from benchmarks.iot_project import DYNAMIC_TABLES
from benchmarks.user_shaped_report import (
    DOWNSTREAM,
    ENGINES,
    FIRST_BUILD,
    REBUILT_WITHIN,
    SINGLE_ROW_SPEEDUP,
    Refresh,
    Results,
    after_first_build,
    median,
    rebuilt_ratios,
    rows_text,
    single_row,
    sizes,
)

#: What a refresh did, as the bars stack it: a recompute that wrote only the rows that differ
#: (or nothing) apart from one that overwrote the DT.
COLORS: Dict[str, str] = {
    "INCREMENTAL": "tab:green",
    "NO_DATA": "yellowgreen",
    "FULL, wrote what differs": "lightcoral",
    "FULL": "tab:red",
    "REINITIALIZE, wrote what differs": "navajowhite",
    "REINITIALIZE": "tab:orange",
}


def kind(x: Refresh) -> str:
    return f"{x.action}, wrote what differs" if x.wrote_difference else x.action


def stacked(
    ax: Any, found: Sequence[Refresh], labels: List[str], by: str, slot: Tuple[float, float], jvm: bool
) -> None:
    """One engine's bars: per label (a DT or a round), refreshes (by model) or seconds (by round)
    stacked by kind; ``slot``: the bars' offset and width within each label's place."""
    offset, width = slot
    bottom = [0.0] * len(labels)
    for name, color in COLORS.items():
        heights = [
            sum(
                1.0 if by == "model" else x.seconds
                for x in found
                if (kind(x), getattr(x, by)) == (name, label)
            )
            for label in labels
        ]
        if not any(heights):
            continue
        ax.bar(
            [k + offset for k in range(len(labels))],
            heights,
            width,
            bottom=bottom,
            color=color,
            hatch="//" if jvm else None,
            label=name,
            edgecolor="white",
        )
        bottom = [b + h for b, h in zip(bottom, heights)]


def plot(r: Results, path: Path) -> None:
    """Per engine side by side (JVM Spark hatched), stacked by action: each DT's refreshes after the
    first build, and the DTs' model time in each round; then the focused cases' ratios."""
    plt = pyplot()  # type: ignore[no-untyped-call]
    fig, axes = plt.subplots(1, 3, figsize=(18, 5.5))
    engines = [e for e in ENGINES if any(x.engine == e for x in r.rounds)]
    width = 0.8 / max(1, len(engines))
    rounds = list(dict.fromkeys(x.name for x in r.rounds if x.name != FIRST_BUILD))
    for i, engine in enumerate(engines):
        found = after_first_build(r, engine)
        for ax, labels, by in ((axes[0], list(DYNAMIC_TABLES), "model"), (axes[1], rounds, "round")):
            stacked(ax, found, labels, by, (i * width, width), engine == "jvm")
    centre = width * (len(engines) - 1) / 2
    for ax, labels in ((axes[0], list(DYNAMIC_TABLES)), (axes[1], rounds)):
        ax.set_xticks([k + centre for k in range(len(labels))], labels, rotation=40, ha="right", fontsize=7)
        # One legend entry a kind, though each engine drew it.
        handles = dict(zip(*reversed(ax.get_legend_handles_labels())))
        ax.legend(handles.values(), handles.keys(), fontsize=7)
    hatched = " (hatched: JVM Spark)" if "jvm" in engines else ""
    axes[0].set(ylabel="refreshes after the first build", title=f"the project: actions per DT{hatched}")
    axes[1].set(ylabel="seconds of the DTs' model time", title=f"the project: each round's DT time{hatched}")
    plot_focused(r, axes[2])
    axes[2].legend(fontsize=7)
    for ax in axes:
        ax.title.set_fontsize(9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def focused_bars(r: Results) -> List[Tuple[str, float, float, str]]:
    """The focused cases' ratios: (label, ratio, its goal or 0, colour)."""
    bars: List[Tuple[str, float, float, str]] = []
    for engine in ENGINES:
        for rows in sizes(r, engine, "focused"):
            tag = f"{'JVM' if engine == 'jvm' else 'emb.'} {rows_text(rows)}"
            for model, (ratio, *_) in rebuilt_ratios(r, engine, rows).items():
                bars.append((f"{model}\n÷ NO_DATA+read\n{tag}", ratio, REBUILT_WITHIN, "tab:blue"))
            down, twin = (
                median(r.pick(engine, "focused", rows=rows, round="insert", model=f"humid_{m}"))
                for m in DOWNSTREAM
            )
            if down and twin:
                bars.append((f"DT after FULL\n÷ after INCR\n{tag}", down / twin, 0, "tab:gray"))
            for source in ("dv", "cow"):
                pair = single_row(r, engine, rows, source)
                if pair:
                    goal = SINGLE_ROW_SPEEDUP if source == "dv" else 0
                    bars.append((f"{source}: FULL\n÷ INCR\n{tag}", pair[0], goal, "tab:purple"))
    return bars


def plot_focused(r: Results, ax: Any) -> None:
    """The focused cases' ratios, a dotted line at each goal."""
    bars = focused_bars(r)
    drawn = ax.bar(range(len(bars)), [b[1] for b in bars], color=[b[3] for b in bars], label="ratio")
    ax.bar_label(drawn, fmt="%.1f×", fontsize=7)
    for k, (_, _, goal, _) in enumerate(bars):
        if goal:
            ax.hlines(goal, k - 0.4, k + 0.4, colors="black", linestyles=":")
    ax.set_xticks(list(range(len(bars))), [b[0] for b in bars], fontsize=6)
    ax.set_yscale("log")
    ax.set(
        ylabel="ratio (dotted: the goal)",
        title="focused cases through `dbt run` (rebuilt: ≤ goal; dv: ≥ goal)",
    )
