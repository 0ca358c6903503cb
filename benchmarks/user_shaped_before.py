"""The goals of benchmarks/user_shaped.py side by side: the run on main before issue 53's product
work (results/user_shaped.before.json, the same code's measurements) and the run now, with the
ratio of each figure now to before."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from benchmarks.common import RESULTS, markdown_table, millions, ms
from benchmarks.user_shaped_report import (
    DOWNSTREAM,
    ENGINE_NAMES,
    ENGINES,
    KEPT,
    KEPT_SHARE,
    NAME,
    REBUILT_WITHIN,
    SINGLE_ROW_AT,
    SINGLE_ROW_SPEEDUP,
    Results,
    actions_text,
    after_first_build,
    median,
    rebuilt_ratios,
    single_row,
    sizes,
)

BEFORE = RESULTS / f"{NAME}.before.json"

#: key → the goal's figure as the table names it.
FIGURES: Dict[str, str] = {
    "share": f"the project: refreshes after the first build INCREMENTAL or NO_DATA (goal ≥ {KEPT_SHARE:.0%})",
    "exact": "the project: rounds after which every DT equals its query (goal: all)",
    "time": "the project: the DTs' model time over the rounds after the first build",
    "rebuilt": "a DT joined to a rebuilt, unchanged table model of 10k rows: its refresh ÷ (a NO_DATA "
    f"refresh + one read of the table model), the worse of two DTs (goal ≤ {REBUILT_WITHIN:g}×)",
    "downstream": "a DT downstream of a DT that refreshed FULL: its action and median refresh "
    "(goal: INCREMENTAL)",
    "dv": "single-row updates to a one-file source with deletion vectors: FULL ÷ INCREMENTAL refresh "
    f"(goal ≥ {SINGLE_ROW_SPEEDUP}× at {millions(SINGLE_ROW_AT)} rows, AUTO INCREMENTAL)",
    "cow": "single-row updates to a one-file source without them (copy-on-write): FULL ÷ INCREMENTAL "
    "refresh (report the cost)",
}

Figure = Tuple[str, Optional[float]]  # as shown, and the number the ratio divides


def project_figures(r: Results, engine: str) -> Dict[str, Figure]:
    rounds = [x for x in r.rounds if x.engine == engine]
    if not rounds:
        return {}
    found = after_first_build(r, engine)
    kept = sum(x.action in KEPT for x in found)
    share = kept / len(found) if found else 0.0
    exact = sum(x.exact == x.checked for x in rounds)
    took = sum(x.seconds for x in found)
    at = f"{millions(rounds[0].rows)} readings"
    return {
        "share": (f"{share:.0%} ({kept} of {len(found)}; {at})", share),
        "exact": (f"{exact} of {len(rounds)}", None),
        "time": (f"{took:.1f} s ({len(rounds) - 1} rounds; {at})", took),
    }


def focused_figures(r: Results, engine: str, rows: int) -> Dict[str, Figure]:
    """The focused cases at one size (none where this engine did not measure it)."""
    at = f"{millions(rows)} rows"
    found: Dict[str, Figure] = {}
    ratios = rebuilt_ratios(r, engine, rows)
    if ratios:
        model, (ratio, took, *_, actions) = max(ratios.items(), key=lambda kv: kv[1][0])
        found["rebuilt"] = (f"{ratio:.1f}× ({model}, {actions} {ms(took)}; {at})", ratio)
    down = r.pick(engine, "focused", rows=rows, round="insert", model=f"humid_{DOWNSTREAM[0]}")
    if down:
        found["downstream"] = (f"{actions_text(down)}, {ms(median(down))} ({at})", median(down))
    for kind in ("dv", "cow"):
        pair = single_row(r, engine, rows, kind)
        if pair:
            text = f"{pair[0]:.1f}× (INCR {ms(pair[1])}, FULL {ms(pair[2])}; AUTO {pair[3]}; {at})"
            found[kind] = (text, pair[0])
    return found


def ratio_text(before: Optional[Figure], now: Optional[Figure]) -> str:
    if before is None or now is None or before[1] is None or now[1] is None or not before[1]:
        return "–"
    return f"{now[1] / before[1]:.2g}×"


def compared(before: Optional[Results], now: Results) -> List[str]:
    """The section "Before and after": one row a goal's figure, engine and size."""
    if before is None:
        return []
    rows: List[Sequence[object]] = []
    for engine in ENGINES:
        pairs = [tuple(project_figures(x, engine) for x in (before, now))]
        measured = sorted({*sizes(before, engine, "focused"), *sizes(now, engine, "focused")})
        pairs += [tuple(focused_figures(x, engine, n) for x in (before, now)) for n in measured]
        for then, current in pairs:
            for key, figure in FIGURES.items():
                if key in then or key in current:
                    shown = [x[key][0] if key in x else "not measured" for x in (then, current)]
                    rows.append(
                        (ENGINE_NAMES[engine], figure, *shown, ratio_text(then.get(key), current.get(key)))
                    )
    lines = [
        "## Before and after",
        "",
        f"The goals' figures on main before issue 53's product work ({before.command}, on "
        f"{', '.join(sorted(set(before.measured_at.values())))} UTC: results/{BEFORE.name}) and now, "
        "measured by the same code; the ratio is now ÷ before (of a time, a share or a ratio). Times "
        "move with the shared machine's load (each run's rounds table gives it, and the before's: "
        f"results/{BEFORE.with_suffix('.md').name}).",
        "",
    ]
    lines += markdown_table(["engine", "figure", "before", "now", "now ÷ before"], rows, "lllll")
    return lines + [""]
