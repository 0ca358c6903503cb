"""The plot of benchmarks/user_shaped.py (results/user_shaped.png): per engine, the run before issue
53's product work and the run now side by side, each DT's refresh actions after the first build and
each round's model time, stacked by action; then the focused cases' ratios against their goals."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from benchmarks.common import millions, pyplot
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
    single_row,
    sizes,
)

#: What a refresh did, as the bars stack it: a recompute that wrote only the rows that differ
#: (or nothing) apart from one that overwrote the DT.
COLORS: Dict[str, str] = {
    "INCREMENTAL": "tab:green",
    "NO_DATA": "yellowgreen",
    "FULL, wrote what differs": "tab:purple",
    "FULL": "tab:red",
    "REINITIALIZE, wrote what differs": "plum",
    "REINITIALIZE": "tab:orange",
}


def kind(x: Refresh) -> str:
    return f"{x.action}, wrote what differs" if x.wrote_difference else x.action


#: A bar's series: its results, its engine, and whether it is the run before issue 53's work.
Series = Tuple[Results, str, bool]


def stacked(
    ax: Any, found: Sequence[Refresh], labels: List[str], by: str, slot: Tuple[float, float], style: Series
) -> None:
    """One series' bars: per label (a DT or a round), refreshes (by model) or seconds (by round)
    stacked by kind; ``slot``: the bars' offset and width within each label's place. JVM Spark's
    bars are hatched, those of the run before faded."""
    offset, width = slot
    _, engine, before = style
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
            alpha=0.4 if before else 1.0,
            hatch="//" if engine == "jvm" else None,
            label=name,
            edgecolor="white",
        )
        bottom = [b + h for b, h in zip(bottom, heights)]


def series_of(r: Results, before: Optional[Results]) -> List[Series]:
    """Per engine, the run before (where there is one) then the run now."""
    found: List[Series] = []
    for engine in ENGINES:
        found += [
            (x, engine, x is before) for x in (before, r) if x and any(y.engine == engine for y in x.rounds)
        ]
    return found


def plot(r: Results, before: Optional[Results], path: Path) -> None:
    """Per series side by side, stacked by action: each DT's refreshes after the first build, and
    the DTs' model time in each round; then the focused cases' ratios, before and now."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(22, 7.5))
    series = series_of(r, before)
    width = 0.8 / max(1, len(series))
    rounds = list(dict.fromkeys(x.name for res, _, _ in series for x in res.rounds if x.name != FIRST_BUILD))
    for i, style in enumerate(series):
        found = after_first_build(style[0], style[1])
        for ax, labels, by in ((axes[0], list(DYNAMIC_TABLES), "model"), (axes[1], rounds, "round")):
            stacked(ax, found, labels, by, (i * width, width), style)
    centre = width * (len(series) - 1) / 2
    for ax, labels in ((axes[0], list(DYNAMIC_TABLES)), (axes[1], rounds)):
        ax.set_xticks([k + centre for k in range(len(labels))], labels, rotation=40, ha="right", fontsize=7)
        # One legend entry a kind, though each series drew it.
        handles = dict(zip(*reversed(ax.get_legend_handles_labels())))
        ax.legend(handles.values(), handles.keys(), fontsize=7)
    order = ", ".join(
        f"{'before' if b else 'now'}{' (JVM Spark, hatched)' if e == 'jvm' else ''}" for _, e, b in series
    )
    note = f"\nbars: {order}\n(before: main ahead of issue 53's work, faded)"
    axes[0].set(ylabel="refreshes after the first build", title=f"the project: actions per DT{note}")
    axes[1].set(ylabel="seconds of the DTs' model time", title=f"the project: each round's DT time{note}")
    plot_focused(r, before, axes[2])
    axes[2].legend(fontsize=7)
    for ax in axes:
        ax.title.set_fontsize(9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def focused_bars(r: Results, when: str) -> List[Tuple[str, float, float, str]]:
    """The focused cases' ratios: (label, ratio, its goal or 0, colour); ``when``: before or now."""
    bars: List[Tuple[str, float, float, str]] = []
    for engine in ENGINES:
        for rows in sizes(r, engine, "focused"):
            tag = f"{when}, {'JVM' if engine == 'jvm' else 'emb.'} {millions(rows)}"
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


def plot_focused(r: Results, before: Optional[Results], ax: Any) -> None:
    """The focused cases' ratios, before (faded) and now, a dotted line at each goal."""
    then = focused_bars(before, "before") if before else []
    bars = then + focused_bars(r, "now")
    if not bars:
        ax.set_axis_off()
        ax.set_title("focused cases: not measured")
        return
    drawn = ax.bar(range(len(bars)), [b[1] for b in bars], color=[b[3] for b in bars], label="ratio")
    for patch in drawn.patches[: len(then)]:
        patch.set_alpha(0.4)
    ax.bar_label(drawn, fmt="%.1f×", fontsize=7)
    for k, (_, _, goal, _) in enumerate(bars):
        if goal:
            ax.hlines(goal, k - 0.4, k + 0.4, colors="black", linestyles=":")
    ax.set_xticks(list(range(len(bars))), [b[0].replace("\n", " ") for b in bars], rotation=90, fontsize=6)
    ax.set_yscale("log")
    ax.set(
        ylabel="ratio (dotted: the goal)",
        title="focused cases through `dbt run` (rebuilt: ≤ goal; dv: ≥ goal)",
    )
