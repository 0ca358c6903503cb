"""Benchmark 3: the join DT against the same transformation written by hand as a dbt incremental
model (merge strategy with an ``is_incremental()`` filter).

The hand-written model is what dbt-spark's merge incremental materialization issues, run directly
on the engine: its first build is a CTAS of the query; each later run merges the query's rows above
the model's id watermark (the usual ``is_incremental()`` filter) into it by id:

    MERGE INTO <model> USING (<query> AND f.id > (SELECT max(id) FROM <model>)) ON id
    WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *

After every change both are timed (wall and process CPU seconds) and
compared, as multisets, with the query recomputed on the current data. Inserts run first (both
stay correct), then mixed updates/deletes/inserts among recent orders, which the watermark
cannot see.

    .venv/bin/python -m benchmarks.hand_written [--full] [--sizes N ...]
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from rich.console import Console
from rich.progress import Progress

from benchmarks.common import (
    RESULTS,
    Goal,
    command_line,
    docstring_paragraphs,
    markdown_table,
    percent,
    pyplot,
    seconds,
    timed,
    write_results,
)
from benchmarks.data import KIND_NOTES, SCHEMA, SHAPES, Fact
from dbt.adapters.dyntable.dynamic_table.lifecycle import RefreshRequest, Trigger

if TYPE_CHECKING:
    from dbt.adapters.dyntable.engines.base import Engine

SHAPE = "join"
HAND_MODEL = f"{SCHEMA}.hand_written_join"
DT_WITHIN = 1.3
QUICK_POINTS = {"insert": [0.001, 0.01, 0.1], "mixed clustered": [0.001, 0.01]}
FULL_POINTS = {"insert": [0.0001, 0.001, 0.01, 0.1, 0.5], "mixed clustered": [0.0001, 0.001, 0.01, 0.1]}


@dataclass
class Point:
    rows: int
    fraction: float
    kind: str
    dt_wall: float
    dt_cpu: float
    hand_wall: float
    hand_cpu: float
    dt_correct: str
    hand_correct: str

    @property
    def ratio(self) -> float:
        return self.dt_wall / self.hand_wall


def merge_statement() -> str:
    watermark = f" AND f.id > (SELECT max(id) FROM {HAND_MODEL})"
    return (
        f"MERGE INTO {HAND_MODEL} AS target USING ({SHAPES[SHAPE].rstrip()}{watermark}) AS source "
        "ON target.id = source.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )


COLUMNS = "id, order_date, amount, country, segment, category, market, ship_date"


def fingerprint(engine: "Engine", relation: str) -> Tuple[int, int]:
    """(row count, sum of row hashes): equal for equal multisets, and in practice only for them.
    Three scans per point instead of four EXCEPT ALLs keep the quick profile within its time."""
    row = engine.execute(
        f"SELECT count(*) AS n, coalesce(sum(cast(hash({COLUMNS}) AS bigint)), 0) AS h FROM {relation}"
    ).collect()[0]
    return row["n"], row["h"]


def verdict(actual: Tuple[int, int], expected: Tuple[int, int]) -> str:
    if actual == expected:
        return "✓"
    if actual[0] != expected[0]:
        return f"✗ {actual[0] - expected[0]:+,} rows"
    return "✗ same row count, different rows"


def run(
    engine: "Engine", warehouse: Path, sizes: Sequence[int], points: Dict[str, List[float]], console: Console
) -> List[Point]:
    from dbt.adapters.dyntable.dynamic_table.config import DynamicTableConfig
    from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
    from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService

    result: List[Point] = []
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("benchmark 3", total=len(sizes) * (1 + sum(map(len, points.values()))))
        for rows in sizes:
            service = DynamicTableService(engine, warehouse, f"dyntable_meta_hand_{rows}")
            progress.update(task, description=f"benchmark 3, {rows:,} rows: loading")
            fact = Fact(engine)
            fact.load(rows)
            name = f"dt_join_{rows}"
            dt = DynamicTable(
                SCHEMA,
                name,
                SHAPES[SHAPE],
                DynamicTableConfig.from_model(
                    name, {"target_lag": "1 minute", "refresh_mode": "incremental"}
                ),
            )
            service.refresh(dt, RefreshRequest(datetime.now(timezone.utc), Trigger.MANUAL))
            fact.sql(f"CREATE TABLE {HAND_MODEL} USING delta AS {SHAPES[SHAPE]}")
            progress.advance(task)
            for kind, fractions in points.items():
                for fraction in fractions:
                    progress.update(
                        task, description=f"benchmark 3, {rows:,} rows: {kind} {percent(fraction)}"
                    )
                    fact.change(kind, max(1, int(rows * fraction)))
                    with timed() as dt_time:
                        outcome = service.refresh(
                            dt, RefreshRequest(datetime.now(timezone.utc), Trigger.MANUAL)
                        )
                    assert outcome.state == "SUCCEEDED", outcome
                    with timed() as hand_time:
                        fact.sql(merge_statement())
                    expected = fingerprint(engine, f"({SHAPES[SHAPE]})")
                    result.append(
                        Point(
                            rows,
                            fraction,
                            kind,
                            dt_time.wall,
                            dt_time.cpu,
                            hand_time.wall,
                            hand_time.cpu,
                            verdict(fingerprint(engine, dt.relation), expected),
                            verdict(fingerprint(engine, HAND_MODEL), expected),
                        )
                    )
                    progress.advance(task)
            engine.execute(f"DROP SCHEMA {SCHEMA} CASCADE").collect()
    return result


def goals(points: List[Point]) -> List[Goal]:
    worst = max(points, key=lambda p: p.ratio)
    largest = max(p.rows for p in points)
    at_largest = [p for p in points if p.rows == largest]
    dt_wrong = sum(p.dt_correct != "✓" for p in points)
    hand_wrong = [p for p in points if p.hand_correct != "✓"]
    return [
        Goal(
            f"the DT within {DT_WITHIN}× of the hand-written incremental model's time",
            f"worst DT/hand-written {worst.ratio:.2f}× ({worst.rows:,} rows, {worst.kind} {percent(worst.fraction)}: "
            f"DT {worst.dt_wall:.3f} s, hand-written {worst.hand_wall:.3f} s); at {largest:,} rows "
            + ", ".join(f"{p.ratio:.2f}×" for p in at_largest),
            worst.ratio <= DT_WITHIN,
        ),
        Goal(
            "the DT stays correct under updates and deletes where the hand-written model does not",
            f"DT wrong at {dt_wrong} of {len(points)} points; hand-written wrong at {len(hand_wrong)} "
            f"(first after {hand_wrong[0].kind} {percent(hand_wrong[0].fraction)})"
            if hand_wrong
            else f"DT wrong at {dt_wrong} of {len(points)} points; hand-written never wrong",
            dt_wrong == 0 and bool(hand_wrong),
        ),
    ]


def body(points: List[Point]) -> List[str]:
    rows = [
        (
            f"{p.rows:,}",
            percent(p.fraction),
            p.kind,
            seconds(p.dt_wall),
            seconds(p.hand_wall),
            f"{p.ratio:.2f}×",
            f"{p.dt_cpu:.2f}",
            f"{p.hand_cpu:.2f}",
            p.dt_correct,
            p.hand_correct,
        )
        for p in points
    ]
    lines = [
        "## Refreshes",
        "",
        "Kinds: " + "; ".join(f"*{k}*: {KIND_NOTES[k]}" for k in ("insert", "mixed clustered")) + ". "
        "Correct: equal, as multisets (row count and sum of row hashes), to the query recomputed on the "
        "current data; a wrong result shows how many rows it has too many or too few. "
        "The hand-written model's errors accumulate: each run only looks above its watermark.",
        "",
    ]
    lines += markdown_table(
        [
            "fact rows",
            "change",
            "kind",
            "DT s",
            "hand-written s",
            "DT / hand",
            "DT CPU s",
            "hand CPU s",
            "DT correct",
            "hand-written correct",
        ],
        rows,
        "rrlrrrrrll",
    )
    lines += ["", "The hand-written model's run:", "", "```sql", merge_statement(), "```"]
    return lines


def plot(points: List[Point], path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    labels = [f"{p.rows / 1e6:g}M {p.kind[:5]} {percent(p.fraction)}" for p in points]
    xs = range(len(points))
    ax.bar([x - 0.2 for x in xs], [p.dt_wall for p in points], 0.4, label="dynamic table (incremental)")
    ax.bar(
        [x + 0.2 for x in xs],
        [p.hand_wall for p in points],
        0.4,
        label="hand-written merge model",
        color=["tab:orange" if p.hand_correct == "✓" else "tab:red" for p in points],
    )
    ax.set_xticks(list(xs), labels, rotation=45, ha="right", fontsize=7)
    ax.set_ylabel("wall seconds per run")
    ax.set_title("join DT vs hand-written incremental model (red: its result is wrong)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def intro() -> str:
    return " ".join(docstring_paragraphs(__doc__, 1, 3))


def main(argv: Optional[Sequence[str]] = None) -> None:
    from benchmarks.common import embedded_engine

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--full", action="store_true", help="1M, 10M and 100M rows, more fractions")
    parser.add_argument("--sizes", type=int, nargs="+", help="override the fact sizes (a trial run)")
    args = parser.parse_args(argv)
    sizes = args.sizes or ([1_000_000, 10_000_000, 100_000_000] if args.full else [1_000_000])
    console = Console()
    with embedded_engine() as (engine, warehouse):
        points = run(engine, warehouse, sizes, FULL_POINTS if args.full else QUICK_POINTS, console)
    command = command_line("hand_written", args.full, args.sizes)
    write_results(
        "hand_written",
        "Benchmark 3: dynamic table vs hand-written dbt incremental model",
        command,
        intro(),
        goals(points),
        body(points) + ["", "![plot](hand_written.png)"],
    )
    plot(points, RESULTS / "hand_written.png")
    console.print(f"benchmark 3: {len(points)} points written")


if __name__ == "__main__":
    main()
