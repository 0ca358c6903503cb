"""The report of benchmarks/user_shaped.py: what it measured (one row per refresh, one per round),
the goals of issue 53 against it, and its tables (the plot: benchmarks/user_shaped_plot.py).

A refresh's action, reason, message and counts come from the refresh history; its time is dbt's
model time (run_results.json) under `dbt run`, the history row's duration under the runner. A
recompute that wrote only the rows that differ from the DT's says so in its history row's
`state_message` ("recomputed: ..."): the tables mark it, since the DTs downstream of it then see
a small change. The history's columns of what a refresh read (`source_rows_read`,
`source_files_read`) are kept where the measured version records them, so the same report reads
results from before they existed (``--report-only``).
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Dict, List, Optional, Sequence, Tuple

from benchmarks.common import Goal, SavedResults, markdown_table, millions, ms, seconds, write_results
from benchmarks.iot_project import DYNAMIC_TABLES

NAME = "user_shaped"
TITLE = "Incremental where users are: a user-shaped project through dbt and the runner (issue 53)"
ENGINES = ("embedded", "jvm")
ENGINE_NAMES = {"embedded": "embedded engine", "jvm": "JVM Spark"}
KEPT = ("INCREMENTAL", "NO_DATA")
ACTIONS = ("FULL", "INCREMENTAL", "NO_DATA", "REINITIALIZE")
REBUILDS = ("FULL", "REINITIALIZE")
#: How a recompute's state_message starts when it wrote only the rows that differ, or nothing
#: (docs/ARCHITECTURE.md, "Rewritten inputs").
RECOMPUTED = "recomputed:"
#: History columns saying what a refresh read (source_rows_read, source_files_read).
READ_COLUMN = re.compile(r"_read$")
ROWS_READ, FILES_READ = "source_rows_read", "source_files_read"
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
#: The focused rounds of single-row updates and of corrections under the daily GROUP BY, whose
#: DTs are named ``<source kind>_<mode>`` and ``<PRUNED>_<mode>``.
SINGLE_ROW_ROUND, PRUNED_ROUND, PRUNED = "single-row update", "correction", "daily_peak"


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
    message: str = ""  # the history's state_message

    @property
    def wrote_difference(self) -> bool:
        """A recompute that wrote only the rows that differ (or nothing): no cascade downstream."""
        return self.action in REBUILDS and self.message.startswith(RECOMPUTED)


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
class Results(SavedResults):
    refreshes: List[Refresh] = field(default_factory=list)
    rounds: List[Round] = field(default_factory=list)
    failures: List[str] = field(default_factory=list)
    skipped: Dict[str, str] = field(default_factory=dict)
    measured_at: Dict[str, str] = field(default_factory=dict)  # "engine part rows" → UTC minute
    durations: Dict[str, float] = field(default_factory=dict)  # "engine part rows" → wall seconds
    command: str = ""

    ITEMS: ClassVar[Dict[str, Callable[[Dict[str, Any]], Any]]] = {
        "refreshes": lambda r: Refresh(**r),
        "rounds": lambda r: Round(**r),
    }

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


def actions_text(found: Sequence[Refresh]) -> str:
    """``FULL 3 of 3``, or the mix: ``FULL 2, INCREMENTAL 1``."""
    counts = {a: sum(r.action == a for r in found) for a in dict.fromkeys(r.action for r in found)}
    if len(counts) == 1:
        action, n = next(iter(counts.items()))
        return f"{action} {n} of {n}" if n > 1 else action
    return ", ".join(f"{a} {n}" for a, n in counts.items())


def read_text(x: Refresh) -> str:
    """``1,004 rows in 1 file``: what one refresh read of its sources, by its history row."""
    rows, files = x.reads.get(ROWS_READ), x.reads.get(FILES_READ)
    if not isinstance(rows, int) or not isinstance(files, int):
        return "–"
    return f"{rows:,} rows in {files:,} file{'s' * (files != 1)}"


def reads_text(found: Sequence[Refresh]) -> str:
    """What each refresh read; or that the measured version's history does not record it."""
    if not any(x.reads for x in found):
        return "not recorded by the refresh history of the measured version"
    return "; ".join(read_text(x) for x in found)


def differences_text(found: Sequence[Refresh]) -> str:
    """How many of the recomputes wrote only the rows that differ (or nothing)."""
    rebuilt = [x for x in found if x.action in REBUILDS]
    wrote = sum(x.wrote_difference for x in rebuilt)
    return f"{wrote} of {len(rebuilt)} wrote only the rows that differ" if rebuilt else ""


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


def modes_compared(
    r: Results, engine: str, rows: int, round_: str, prefix: str
) -> Optional[Tuple[float, float, float, str]]:
    """(FULL / INCREMENTAL, incremental s, full s, AUTO's actions) of the DTs ``<prefix>_<mode>``,
    the same query in each refresh mode, over ``round_``'s refreshes."""

    def of(mode: str) -> List[Refresh]:
        return r.pick(engine, "focused", rows=rows, round=round_, model=f"{prefix}_{mode}")

    incremental, full = median(of("incremental")), median(of("full"))
    if incremental is None or full is None:
        return None
    return full / incremental, incremental, full, actions_text(of("auto"))


def single_row(r: Results, engine: str, rows: int, kind: str) -> Optional[Tuple[float, float, float, str]]:
    """:func:`modes_compared` for the single-row updates of the ``kind`` source."""
    return modes_compared(r, engine, rows, SINGLE_ROW_ROUND, kind)


def compared_text(pair: Optional[Tuple[float, float, float, str]]) -> str:
    if pair is None:
        return "not measured"
    return f"FULL/INCREMENTAL {pair[0]:.1f}× (INCREMENTAL {ms(pair[1])}, FULL {ms(pair[2])}); AUTO chose {pair[3]}"


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
    full, down, twin, upstream = (
        r.pick(engine, "focused", rows=rows, round="insert", model=m)
        for m in ("humid_full", *(f"humid_{d}" for d in DOWNSTREAM), "humid_incremental")
    )
    net = [x.rows_inserted + x.rows_deleted for x in upstream]
    rows_read = [v for x in down if isinstance(v := x.reads.get(ROWS_READ), int)]
    met: Optional[bool] = all(x.action == "INCREMENTAL" for x in down)
    if met and len(rows_read) == len(down):
        met = all(v <= READS_PER_CHANGE * max(1, n) for v, n in zip(rows_read, net))
    elif met:
        met = None  # INCREMENTAL, but what it read is not recorded
    return Goal(
        f"{where}: a DT downstream of a DT that refreshed FULL refreshes INCREMENTAL, reading rows "
        f"proportional to the net change (≤ {READS_PER_CHANGE} rows read a changed row)",
        f"{actions_text(down)}, {ms(median(down))} (over the incremental twin: {actions_text(twin)}, "
        f"{ms(median(twin))}); upstream FULL: {differences_text(full) or 'none'}; net change "
        f"{'/'.join(map(str, net))} rows; read: {reads_text(down)}"
        if down
        else "not measured",
        met if down else None,
    )


def single_row_goals(r: Results, engine: str, rows: int, where: str) -> List[Goal]:
    found: List[Goal] = []
    for kind, label in (("dv", "with deletion vectors"), ("cow", "without them (copy-on-write)")):
        pair = single_row(r, engine, rows, kind)
        measured = compared_text(pair)
        goal = f"{where}: single-row updates to a source in one file, {label}: "
        if kind == "cow":
            found.append(Goal(goal + "report the cost", measured, None))
            continue
        met = pair is not None and pair[0] >= SINGLE_ROW_SPEEDUP and pair[3].startswith("INCREMENTAL")
        goal += (
            f"INCREMENTAL and ≥ {SINGLE_ROW_SPEEDUP}× faster than FULL (at {millions(SINGLE_ROW_AT)} rows)"
        )
        found.append(Goal(goal, measured, met if pair and rows >= SINGLE_ROW_AT else None))
    return found


def goals(r: Results) -> List[Goal]:
    found: List[Goal] = []
    for engine in ENGINES:
        found += project_goals(r, engine)
        for rows in sizes(r, engine, "focused"):
            where = f"{ENGINE_NAMES[engine]}, {millions(rows)} rows"
            found.append(rebuilt_goal(r, engine, rows, where))
            found.append(downstream_goal(r, engine, rows, where))
            found += single_row_goals(r, engine, rows, where)
            found.append(pruned_goal(r, engine, rows, where))
    return found


def pruned_goal(r: Results, engine: str, rows: int, where: str) -> Goal:
    """Recent readings corrected under a daily GROUP BY: a rescan of the days they span."""
    pair = modes_compared(r, engine, rows, PRUNED_ROUND, PRUNED)
    reads = reads_text(
        r.pick(engine, "focused", rows=rows, round=PRUNED_ROUND, model=f"{PRUNED}_incremental")
    )
    return Goal(
        f"{where}: recent readings corrected under a daily GROUP BY (its rescan pruned to the "
        "change's days): report the cost",
        compared_text(pair) + (f"; INCREMENTAL read: {reads}" if pair and reads else ""),
        None,
    )


# -- the tables --------------------------------------------------------------------------------------

LETTER = {"FULL": "F", "INCREMENTAL": "I", "NO_DATA": "N", "REINITIALIZE": "R"}


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def top_reasons(found: Sequence[Refresh], count: int = 3, width: int = 220) -> str:
    """The most frequent reasons (figures aside), each shown by its first instance."""
    found = [x for x in found if x.reason]
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
        f"Rounds, each followed by the check of every DT (verify.py, full), {millions(rounds[0].rows)} readings:",
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


def mix_row(dt: str, what: str, lag: str, found: Sequence[Refresh]) -> Tuple[object, ...]:
    """A DT's (or, dt "**all**", every DT's) actions over every round, the recomputes after the
    first build that wrote only what differs, and the share kept incremental after it."""
    after = [x for x in found if x.round != FIRST_BUILD and x.action in ACTIONS]
    counts = Counter(x.action for x in found)
    kept = sum(x.action in KEPT for x in after)
    share = f"{kept} of {len(after)} ({kept / len(after):.0%})" if after else "–"
    if dt == "**all**":
        share = f"**{share}**"
    rebuilt = [x for x in after if x.action in REBUILDS]
    wrote = f"{sum(x.wrote_difference for x in rebuilt)} of {len(rebuilt)}" if rebuilt else "–"
    return (dt, what, lag, *(counts[a] for a in ACTIONS), wrote, share)


def mix_table(r: Results, engine: str) -> List[str]:
    lines = [
        "",
        "Refresh actions per DT over every round (the first build included); of the FULL and "
        "REINITIALIZE after the first build, those that wrote only the rows that differ from the "
        "DT's, or nothing (their history row's state_message: the DTs downstream then see a small "
        "change); the share INCREMENTAL or NO_DATA after the first build; then the reasons of the "
        "others:",
        "",
    ]
    table = [
        mix_row(dt, what, lag, r.pick(engine, "project", model=dt))
        for dt, (what, lag, _) in DYNAMIC_TABLES.items()
    ]
    table.append(mix_row("**all**", "", "", [x for x in r.pick(engine, "project") if x.action in ACTIONS]))
    reasons = [
        (dt, top_reasons([x for x in after_first_build(r, engine) if x.model == dt and x.action not in KEPT]))
        for dt in DYNAMIC_TABLES
    ]
    lines += markdown_table(
        [
            "DT",
            "what",
            "target lag",
            *ACTIONS,
            "of them wrote only what differs",
            "INCR or NO_DATA after the first build",
        ],
        table,
        "lll" + "r" * 6,
    )
    lines += [
        "",
        *markdown_table(["DT", "why not incremental (top 3, after the first build)"], reasons, "ll"),
    ]
    return lines


def reads_table(r: Results, engine: str) -> List[str]:
    """Per action after the first build, the source rows and files a refresh read (the history's
    source_rows_read, source_files_read): median and most."""
    found = [x for x in after_first_build(r, engine) if isinstance(x.reads.get(ROWS_READ), int)]
    if not found:
        return []
    table = []
    for action in ACTIONS:
        of = [x for x in found if x.action == action]
        if of:
            rows, files = ([int(str(x.reads.get(k, 0))) for x in of] for k in (ROWS_READ, FILES_READ))
            table.append(
                (
                    action,
                    len(of),
                    f"{statistics.median(rows):,.0f}",
                    f"{max(rows):,}",
                    f"{statistics.median(files):g}",
                    max(files),
                )
            )
    lines = [
        "",
        "What a refresh read of its sources after the first build, by action (the refresh history):",
        "",
    ]
    return lines + markdown_table(
        ["action", "refreshes", "rows read, median", "most", "files read, median", "most"], table, "lrrrrr"
    )


def time_cell(x: Refresh) -> str:
    """``Fd 0.512 (1,004 r, 1 f)``: the action's letter (d: wrote only what differs), the model
    time, and the source rows and files read where the history records them."""
    letter = LETTER.get(x.action, x.action) + "d" * x.wrote_difference
    rows, files = x.reads.get(ROWS_READ), x.reads.get(FILES_READ)
    read = f" ({rows:,} r, {files:,} f)" if isinstance(rows, int) and isinstance(files, int) else ""
    return f"{letter} {seconds(x.seconds)}{read}"


def times_table(r: Results, engine: str) -> List[str]:
    names = list(dict.fromkeys(x.name for x in r.rounds if x.engine == engine))
    lines = [
        "",
        "Model time per DT per round in seconds (through dbt: run_results.json's execution_time; "
        "through the runner: the refresh's own duration), with the action: F FULL, I INCREMENTAL, "
        "N NO_DATA, R REINITIALIZE, d: the recompute wrote only the rows that differ (or nothing); "
        "then the source rows (r) and files (f) the refresh read, where the history records them:",
        "",
    ]
    table = []
    for dt in DYNAMIC_TABLES:
        found = [r.pick(engine, "project", model=dt, round=name) for name in names]
        table.append((dt, *(" ".join(time_cell(x) for x in xs) or "–" for xs in found)))
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
    cases += [(f"single-row update, {k}", SINGLE_ROW_ROUND, f"{k}_{m}") for k in pairs for m in MODES]
    pairs[PRUNED] = modes_compared(r, engine, rows, PRUNED_ROUND, PRUNED)
    cases += [("correction under a daily GROUP BY", PRUNED_ROUND, f"{PRUNED}_{m}") for m in MODES]
    table = []
    for case, round_, model in cases:
        found = r.pick(engine, "focused", rows=rows, round=round_, model=model)
        if not found:
            continue  # a case this run (or the version measured) did not have
        pair = pairs.get(model.rsplit("_", 1)[0])
        compared = (
            f"{ratios[model][0]:.1f}× NO_DATA + read"
            if round_ == "rebuilt"
            else f"read: {reads_text(found)}"
            if "after" in model or model.startswith(PRUNED)
            else ""
        )
        if pair and model.endswith("_incremental"):
            compared = "; ".join(filter(None, (f"FULL/INCR {pair[0]:.1f}×", compared)))
        compared = "; ".join(filter(None, (compared, differences_text(found))))
        others = [x for x in found if x.action not in KEPT] or found
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
    lines = [f"### Focused cases, {ENGINE_NAMES[engine]}, {millions(rows)} rows", ""]
    lines += markdown_table(
        [
            "case",
            "DT",
            "action",
            "median",
            "compared",
            "reason (of the first not INCREMENTAL nor NO_DATA, else the first)",
        ],
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
            lines += rounds_table(r, engine) + mix_table(r, engine) + reads_table(r, engine)
            lines += times_table(r, engine) + [""]
        for rows in sizes(r, engine, "focused"):
            lines += focused_table(r, engine, rows)
    took = [f"{k.replace(' ', ', ', 1)} rows: {v / 60:.0f} min" for k, v in r.durations.items()]
    lines += ["## Run time", "", "Wall clock of each part (engine, part, size): " + "; ".join(took) + "."]
    return lines


def report(r: Results, command: str, intro: str, first: Sequence[str] = ()) -> None:
    """results/user_shaped.md and its goals, ``first`` (the goals before and after,
    benchmarks/user_shaped_before.py) ahead of the tables (the plot: benchmarks/user_shaped_plot.py)."""
    lines = [*first, *body(r), "", f"![plot]({NAME}.png)"]
    if r.failures:
        lines = ["## Failures", "", *(f"- {cell(f)}" for f in r.failures), ""] + lines
    write_results(NAME, TITLE, command, intro, goals(r), lines)
