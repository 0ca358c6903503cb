"""The report of benchmarks/user_shaped.py: what it measured (one row per refresh, one per round),
the goals of issue 53 against it, the tables and the plot.

A refresh's action, reason and counts come from the refresh history; its time is dbt's model time
(run_results.json) under `dbt run`, the history row's duration under the runner. History columns
that say what a refresh read (named like rows_read, files_read) are kept where this version of
dbt-dyntable records them, so the same report reads the code before and after they exist.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from benchmarks.common import RESULTS, Goal, markdown_table, pyplot, seconds, write_results
from benchmarks.iot_project import DYNAMIC_TABLES

NAME = "user_shaped"
TITLE = "Incremental where users are: a user-shaped project through dbt and the runner (issue 53)"
ENGINES = ("embedded", "jvm")
ENGINE_NAMES = {"embedded": "embedded engine", "jvm": "JVM Spark"}
KEPT = ("INCREMENTAL", "NO_DATA")
ACTIONS = ("FULL", "INCREMENTAL", "NO_DATA", "REINITIALIZE")
#: History columns saying what a refresh read, where this version records them (rows_read, ...).
READ_COLUMN = re.compile(r"read|scan")
FIRST_BUILD = "first build"
# Issue 53's goals.
KEPT_SHARE = 0.90
REBUILT_WITHIN = 2.0
SINGLE_ROW_SPEEDUP, SINGLE_ROW_AT = 20, 10_000_000
#: "Reads proportional to the net change": at most this many rows read per row of net change.
READS_PER_CHANGE = 10
#: The focused DTs: the two over the always-FULL DT and its incremental twin; the refresh modes.
DOWNSTREAM = ("by_device_after_full", "by_device_after_incremental")
MODES = ("auto", "incremental", "full")


@dataclass
class Refresh:
    """One refresh (or, action TEST, one `dbt test` node) and what it cost."""

    engine: str
    part: str  # project | focused
    rows: int
    round: str
    model: str
    action: str
    state: str
    trigger: str
    reason: str
    seconds: float  # through dbt: the model's execution_time; through the runner: the refresh's
    rows_inserted: int = 0
    rows_deleted: int = 0
    reads: Dict[str, object] = field(default_factory=dict)


@dataclass
class Round:
    engine: str
    rows: int
    name: str
    change: str
    command: str
    wall: float
    check_wall: float
    exact: int
    checked: int
    load: float


@dataclass
class Results:
    refreshes: List[Refresh] = field(default_factory=list)
    rounds: List[Round] = field(default_factory=list)
    failures: List[str] = field(default_factory=list)
    skipped: Dict[str, str] = field(default_factory=dict)
    measured_at: Dict[str, str] = field(default_factory=dict)  # "engine part rows" → UTC minute
    durations: Dict[str, float] = field(default_factory=dict)  # "engine part rows" → wall seconds
    command: str = ""

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=0) + "\n")

    @classmethod
    def load(cls, path: Path) -> "Results":
        raw = json.loads(path.read_text())
        raw["refreshes"] = [Refresh(**r) for r in raw["refreshes"]]
        raw["rounds"] = [Round(**r) for r in raw["rounds"]]
        return cls(**raw)

    def keeping(self, earlier: "Results") -> "Results":
        """These results, with ``earlier``'s of the engines, parts and sizes not measured now."""
        kept = {k for k in earlier.measured_at if k not in self.measured_at}
        engines_now = {k.split()[0] for k in self.measured_at} | set(self.skipped)

        def key(engine: str, part: str, rows: int) -> str:
            return f"{engine} {part} {rows}"

        return Results(
            [r for r in earlier.refreshes if key(r.engine, r.part, r.rows) in kept] + self.refreshes,
            [r for r in earlier.rounds if key(r.engine, "project", r.rows) in kept] + self.rounds,
            [f for f in earlier.failures if f.split(":")[0] in kept] + self.failures,
            {**{e: w for e, w in earlier.skipped.items() if e not in engines_now}, **self.skipped},
            {**{k: earlier.measured_at[k] for k in kept}, **self.measured_at},
            {**{k: v for k, v in earlier.durations.items() if k in kept}, **self.durations},
            self.command,
        )

    def pick(self, engine: str, part: str, **match: object) -> List[Refresh]:
        return [
            r
            for r in self.refreshes
            if r.engine == engine and r.part == part and all(getattr(r, k) == v for k, v in match.items())
        ]


# -- the figures -------------------------------------------------------------------------------------


def median(found: Sequence[Refresh]) -> Optional[float]:
    return statistics.median(r.seconds for r in found) if found else None


def ms(value: Optional[float]) -> str:
    return "–" if value is None else f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def rows_text(rows: int) -> str:
    return f"{rows / 1e6:g}M"


def actions_text(found: Sequence[Refresh]) -> str:
    """``FULL 3 of 3``, or the mix: ``FULL 2, INCREMENTAL 1``."""
    counts = {a: sum(r.action == a for r in found) for a in dict.fromkeys(r.action for r in found)}
    if len(counts) == 1:
        action, n = next(iter(counts.items()))
        return f"{action} {n} of {n}" if n > 1 else action
    return ", ".join(f"{a} {n}" for a, n in counts.items())


def reads_text(found: Sequence[Refresh]) -> str:
    """What the refreshes read, by the history's read columns; or that it does not record them."""
    columns = sorted({k for r in found for k in r.reads})
    if not columns:
        return "not recorded by the refresh history of this version"
    return "; ".join(
        f"{k} "
        + "/".join(
            f"{r.reads.get(k, '–'):,}" if isinstance(r.reads.get(k), int) else str(r.reads.get(k, "–"))
            for r in found
        )
        for k in columns
    )


def after_first_build(r: Results, engine: str) -> List[Refresh]:
    return [x for x in r.pick(engine, "project") if x.round != FIRST_BUILD and x.action in ACTIONS]


def sizes(r: Results, engine: str, part: str) -> List[int]:
    return sorted({x.rows for x in r.pick(engine, part)})


def rebuilt_ratios(r: Results, engine: str, rows: int) -> Dict[str, Tuple[float, float, float, float, str]]:
    """model → (ratio, rebuilt s, NO_DATA s, read s, the rebuilt refreshes' actions)."""
    read = median(r.pick(engine, "focused", rows=rows, round="read", action="READ"))
    found = {}
    for model in ("site_totals", "readings_sited"):
        rebuilt = r.pick(engine, "focused", rows=rows, round="rebuilt", model=model)
        no_data = median(r.pick(engine, "focused", rows=rows, round="no change", model=model))
        time_rebuilt = median(rebuilt)
        if time_rebuilt is not None and no_data is not None and read is not None:
            found[model] = (
                time_rebuilt / (no_data + read),
                time_rebuilt,
                no_data,
                read,
                actions_text(rebuilt),
            )
    return found


def single_row(r: Results, engine: str, rows: int, kind: str) -> Optional[Tuple[float, float, float, str]]:
    """(FULL / INCREMENTAL, incremental s, full s, AUTO's actions) of the ``kind`` source's DTs."""

    def of(mode: str) -> List[Refresh]:
        return r.pick(engine, "focused", rows=rows, round="single-row update", model=f"{kind}_{mode}")

    incremental, full = median(of("incremental")), median(of("full"))
    if incremental is None or full is None:
        return None
    return full / incremental, incremental, full, actions_text(of("auto"))


def project_goals(r: Results, engine: str) -> List[Goal]:
    where = ENGINE_NAMES[engine]
    share_goal = (
        f"{where}, the project: ≥ {KEPT_SHARE:.0%} of refreshes after the first build INCREMENTAL or NO_DATA"
    )
    exact_goal = f"{where}, the project: every DT equals its query after every round"
    found, rounds = after_first_build(r, engine), [x for x in r.rounds if x.engine == engine]
    if not rounds:
        why = r.skipped.get(engine, "not measured in this run")
        return [
            Goal(share_goal, f"not measured: {why}", None),
            Goal(exact_goal, f"not measured: {why}", None),
        ]
    kept = sum(x.action in KEPT for x in found)
    share = kept / len(found) if found else 0.0
    failed = [f for f in r.failures if f.startswith(f"{engine} project")]
    exact = sum(x.exact == x.checked for x in rounds)
    return [
        Goal(
            share_goal,
            f"{share:.0%} ({kept} of {len(found)} refreshes, {len(rounds) - 1} rounds)",
            share >= KEPT_SHARE,
        ),
        Goal(
            exact_goal,
            f"{exact} of {len(rounds)} rounds, {rounds[-1].checked} DTs each"
            + (f"; {failed[0]}" if failed else ""),
            exact == len(rounds) and not failed,
        ),
    ]


def rebuilt_goal(r: Results, engine: str, rows: int, where: str) -> Goal:
    ratios = rebuilt_ratios(r, engine, rows)
    return Goal(
        f"{where}: a DT joined to a rebuilt, unchanged `table` model of 10k rows refreshes in ≤ "
        f"{REBUILT_WITHIN:g}× a NO_DATA refresh plus one read of the table model, through `dbt run`",
        "; ".join(
            f"{m} {x:.1f}× ({a} {ms(t)}; NO_DATA {ms(n)} + read {ms(rd)})"
            for m, (x, t, n, rd, a) in ratios.items()
        )
        or "not measured",
        all(x <= REBUILT_WITHIN for x, *_ in ratios.values()) if ratios else None,
    )


def downstream_goal(r: Results, engine: str, rows: int, where: str) -> Goal:
    """The DT over the FULL one: INCREMENTAL, and where the history records rows read, at most
    READS_PER_CHANGE a row of the net change (what the incremental twin upstream changed)."""
    down, twin, upstream = (
        r.pick(engine, "focused", rows=rows, round="insert", model=m)
        for m in (*(f"humid_{d}" for d in DOWNSTREAM), "humid_incremental")
    )
    net = [x.rows_inserted + x.rows_deleted for x in upstream]
    rows_read = [v for x in down for k, v in x.reads.items() if "row" in k and isinstance(v, int)]
    met: Optional[bool] = all(x.action == "INCREMENTAL" for x in down)
    if met and rows_read:
        met = all(v <= READS_PER_CHANGE * max(1, n) for v, n in zip(rows_read, net))
    elif met:
        met = None  # INCREMENTAL, but what it read is not recorded
    return Goal(
        f"{where}: a DT downstream of a DT that refreshed FULL refreshes INCREMENTAL, reading rows "
        f"proportional to the net change (≤ {READS_PER_CHANGE} rows read a changed row)",
        f"{actions_text(down)}, {ms(median(down))} (over the incremental twin: {actions_text(twin)}, "
        f"{ms(median(twin))}); net change {'/'.join(map(str, net))} rows; reads: {reads_text(down)}"
        if down
        else "not measured",
        met if down else None,
    )


def single_row_goals(r: Results, engine: str, rows: int, where: str) -> List[Goal]:
    found: List[Goal] = []
    for kind, label in (("dv", "with deletion vectors"), ("cow", "without them (copy-on-write)")):
        pair = single_row(r, engine, rows, kind)
        measured = (
            f"FULL/INCREMENTAL {pair[0]:.1f}× (INCREMENTAL {ms(pair[1])}, FULL {ms(pair[2])}); AUTO chose {pair[3]}"
            if pair
            else "not measured"
        )
        goal = f"{where}: single-row updates to a source in one file, {label}: "
        if kind == "cow":
            found.append(Goal(goal + "report the cost", measured, None))
            continue
        met = pair is not None and pair[0] >= SINGLE_ROW_SPEEDUP and pair[3].startswith("INCREMENTAL")
        goal += (
            f"INCREMENTAL and ≥ {SINGLE_ROW_SPEEDUP}× faster than FULL (at {rows_text(SINGLE_ROW_AT)} rows)"
        )
        found.append(Goal(goal, measured, met if pair and rows >= SINGLE_ROW_AT else None))
    return found


def goals(r: Results) -> List[Goal]:
    found: List[Goal] = []
    for engine in ENGINES:
        found += project_goals(r, engine)
        for rows in sizes(r, engine, "focused"):
            where = f"{ENGINE_NAMES[engine]}, {rows_text(rows)} rows"
            found.append(rebuilt_goal(r, engine, rows, where))
            found.append(downstream_goal(r, engine, rows, where))
            found += single_row_goals(r, engine, rows, where)
    return found


# -- the tables --------------------------------------------------------------------------------------

LETTER = {"FULL": "F", "INCREMENTAL": "I", "NO_DATA": "N", "REINITIALIZE": "R"}


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def top_reasons(found: Sequence[Refresh], count: int = 3, width: int = 220) -> str:
    """The most frequent reasons (figures aside), each shown by its first instance."""
    first: Dict[str, str] = {}
    for x in found:
        first.setdefault(re.sub(r"\d[\d.,]*", "#", x.reason), x.reason)
    tally = Counter(re.sub(r"\d[\d.,]*", "#", x.reason) for x in found)
    shown = [
        f"{n}× {first[p][:width] + ('…' if len(first[p]) > width else '')}"
        for p, n in tally.most_common(count)
    ]
    return cell("; ".join(shown)) if shown else "–"


def rounds_table(r: Results, engine: str) -> List[str]:
    rounds = [x for x in r.rounds if x.engine == engine]
    lines = [
        f"Rounds, each followed by the check of every DT (verify.py, full), {rows_text(rounds[0].rows)} readings:",
        "",
    ]
    lines += markdown_table(
        ["round", "change", "command", "wall s", "DTs equal their query", "check s", "load"],
        [
            (
                x.name,
                cell(x.change),
                f"`{x.command}`",
                f"{x.wall:.1f}",
                f"{x.exact} of {x.checked}",
                f"{x.check_wall:.1f}",
                f"{x.load:.1f}",
            )
            for x in rounds
        ],
        "lllrrrr",
    )
    return lines


def mix_table(r: Results, engine: str) -> List[str]:
    lines = [
        "",
        "Refresh actions per DT over every round (the first build included), and the share "
        "INCREMENTAL or NO_DATA after it; then the reasons of the others:",
        "",
    ]
    table, reasons = [], []
    for dt, (what, lag, _) in DYNAMIC_TABLES.items():
        found = r.pick(engine, "project", model=dt)
        after = [x for x in found if x.round != FIRST_BUILD and x.action in ACTIONS]
        counts = Counter(x.action for x in found)
        kept = sum(x.action in KEPT for x in after)
        share = f"{kept} of {len(after)} ({kept / len(after):.0%})" if after else "–"
        table.append((dt, what, lag, *(counts[a] for a in ACTIONS), share))
        reasons.append((dt, top_reasons([x for x in after if x.action not in KEPT])))
    found = after_first_build(r, engine)
    kept = sum(x.action in KEPT for x in found)
    everything = Counter(x.action for x in r.pick(engine, "project") if x.action in ACTIONS)
    share = f"{kept} of {len(found)} ({kept / len(found):.0%})" if found else "–"
    table.append(("**all**", "", "", *(everything[a] for a in ACTIONS), f"**{share}**"))
    lines += markdown_table(
        ["DT", "what", "target lag", *ACTIONS, "INCR or NO_DATA after the first build"],
        table,
        "lll" + "r" * 5,
    )
    lines += [
        "",
        *markdown_table(["DT", "why not incremental (top 3, after the first build)"], reasons, "ll"),
    ]
    return lines


def times_table(r: Results, engine: str) -> List[str]:
    names = list(dict.fromkeys(x.name for x in r.rounds if x.engine == engine))
    lines = [
        "",
        "Model time per DT per round (through dbt: run_results.json's execution_time; through the "
        "runner: the refresh's own duration), with the action: F FULL, I INCREMENTAL, N NO_DATA, R "
        "REINITIALIZE, and what the refresh read where the history records it:",
        "",
    ]
    table = []
    for dt in DYNAMIC_TABLES:
        cells = []
        for name in names:
            found = r.pick(engine, "project", model=dt, round=name)
            reads = "; ".join(f"{k} {v}" for x in found for k, v in x.reads.items())
            cells.append(
                " ".join(f"{LETTER.get(x.action, x.action)} {seconds(x.seconds)}" for x in found)
                + (f" ({reads})" if reads else "")
                or "–"
            )
        table.append((dt, *cells))
    totals = [
        seconds(sum(x.seconds for x in r.pick(engine, "project", round=n) if x.action != "TEST"))
        for n in names
    ]
    table.append(("**all DTs**", *totals))
    lines += markdown_table(["DT", *names], table)
    return lines


def focused_rows(r: Results, engine: str, rows: int) -> List[Tuple[str, str, str, str, str, str]]:
    """(case, DT, actions, median, compared, first reason) of each focused DT at one size."""
    ratios, pairs = (
        rebuilt_ratios(r, engine, rows),
        {k: single_row(r, engine, rows, k) for k in ("dv", "cow")},
    )
    cases = [("table model rebuilt, unchanged", "rebuilt", m) for m in ratios] + [
        ("nothing rebuilt", "no change", m) for m in ratios
    ]
    upstream_and_downstream = ("full", DOWNSTREAM[0], "incremental", DOWNSTREAM[1])
    cases += [(f"insert of {rows // 1000:,} rows", "insert", f"humid_{m}") for m in upstream_and_downstream]
    cases += [(f"single-row update, {k}", "single-row update", f"{k}_{m}") for k in pairs for m in MODES]
    table = []
    for case, round_, model in cases:
        found = r.pick(engine, "focused", rows=rows, round=round_, model=model)
        pair = pairs.get(model.split("_")[0])
        compared = (
            f"{ratios[model][0]:.1f}× NO_DATA + read"
            if round_ == "rebuilt"
            else f"reads: {reads_text(found)}"
            if "after" in model
            else f"FULL/INCR {pair[0]:.1f}×"
            if pair and model.endswith("_incremental")
            else ""
        )
        others = [x for x in found if x.action not in KEPT]
        reason = top_reasons([x for x in others if x.reason == others[0].reason], 1, 160) if others else "–"
        table.append((case, model, actions_text(found), ms(median(found)), compared, reason))
    read = r.pick(engine, "focused", rows=rows, round="read", action="READ")
    if read:
        table.insert(
            len(ratios),
            ("one read of the table model", "dim_devices", "engine, warm", ms(median(read)), "", "–"),
        )
    return table


def focused_table(r: Results, engine: str, rows: int) -> List[str]:
    lines = [f"### Focused cases, {ENGINE_NAMES[engine]}, {rows_text(rows)} rows", ""]
    lines += markdown_table(
        ["case", "DT", "action", "median", "compared", "reason (the first neither INCREMENTAL nor NO_DATA)"],
        focused_rows(r, engine, rows),
        "lllrll",
    )
    return lines + [""]


def body(r: Results) -> List[str]:
    lines = ["## The project", ""]
    lines += markdown_table(
        ["DT", "what", "target lag"], [(dt, w, lag) for dt, (w, lag, _) in DYNAMIC_TABLES.items()], "lll"
    )
    for engine in ENGINES:
        lines += ["", f"## {ENGINE_NAMES[engine]}", ""]
        if not any(x.engine == engine for x in r.rounds):
            lines += [f"The project: not measured ({r.skipped.get(engine, 'not in this run')}).", ""]
        else:
            lines += rounds_table(r, engine) + mix_table(r, engine) + times_table(r, engine) + [""]
        for rows in sizes(r, engine, "focused"):
            lines += focused_table(r, engine, rows)
    took = [f"{k.replace(' ', ', ', 1)} rows: {v / 60:.0f} min" for k, v in r.durations.items()]
    lines += ["## Run time", "", "Wall clock of each part (engine, part, size): " + "; ".join(took) + "."]
    return lines


# -- the plot ----------------------------------------------------------------------------------------

COLORS = {
    "INCREMENTAL": "tab:green",
    "NO_DATA": "yellowgreen",
    "FULL": "tab:red",
    "REINITIALIZE": "tab:orange",
}


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
            bottom = [0.0] * len(labels)
            for action in ACTIONS:
                heights = [
                    sum(
                        1.0 if by == "model" else x.seconds
                        for x in found
                        if (x.action, getattr(x, by)) == (action, label)
                    )
                    for label in labels
                ]
                ax.bar(
                    [k + i * width for k in range(len(labels))],
                    heights,
                    width,
                    bottom=bottom,
                    color=COLORS[action],
                    hatch="//" if engine == "jvm" else None,
                    label=action if i == 0 else None,
                    edgecolor="white",
                )
                bottom = [b + h for b, h in zip(bottom, heights)]
            centre = width * (len(engines) - 1) / 2
            ax.set_xticks(
                [k + centre for k in range(len(labels))], labels, rotation=40, ha="right", fontsize=7
            )
    hatched = " (hatched: JVM Spark)" if "jvm" in engines else ""
    axes[0].set(ylabel="refreshes after the first build", title=f"the project: actions per DT{hatched}")
    axes[1].set(ylabel="seconds of the DTs' model time", title=f"the project: each round's DT time{hatched}")
    plot_focused(r, axes[2])
    for ax in axes:
        ax.title.set_fontsize(9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_focused(r: Results, ax: Any) -> None:
    """The focused cases' ratios, a dotted line at each goal."""
    bars: List[Tuple[str, float, float, str]] = []  # label, ratio, goal (0: none), colour
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
            for kind in ("dv", "cow"):
                pair = single_row(r, engine, rows, kind)
                if pair:
                    bars.append(
                        (
                            f"{kind}: FULL\n÷ INCR\n{tag}",
                            pair[0],
                            SINGLE_ROW_SPEEDUP if kind == "dv" else 0,
                            "tab:purple",
                        )
                    )
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


def report(r: Results, command: str, intro: str) -> None:
    lines = body(r) + ["", f"![plot]({NAME}.png)"]
    if r.failures:
        lines = ["## Failures", "", *(f"- {cell(f)}" for f in r.failures), ""] + lines
    write_results(NAME, TITLE, command, intro, goals(r), lines)
    plot(r, RESULTS / f"{NAME}.png")
