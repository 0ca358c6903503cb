"""What grouping by every column costs against a scan, on each engine: AUTO's price of a
recompute's difference from the DT and of a rewritten input's net change
(``Capabilities.grouping_cost``, docs/ARCHITECTURE.md, "Deciding").

A DT-shaped table (readings joined to a device dimension: nine columns) is written at two sizes;
for each, a scan of it (every column hashed) and the difference a recompute computes (the query's
rows and the table's, grouped by every column: ``apply.difference``) are timed, the median of
three after a warm-up. The difference's time per byte grouped (the query's rows and the table's:
twice the table), over the scan's per byte, is what the capability should hold; at the larger
size, where delta-spark's fixed job costs weigh least, it is judged. JVM Spark runs in a child
process: PySpark cannot hold a JVM session beside the embedded engine's Spark Connect session.

    python -m benchmarks.grouping_cost [--sizes 1000000 4000000] [--spark-jars DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from rich.console import Console

from benchmarks.common import (
    Goal,
    add_spark_jars_option,
    docstring_paragraphs,
    embedded_engine,
    jvm_engine,
    markdown_table,
    ms,
    say,
    write_results,
)

NAME = "grouping_cost"
TITLE = "Grouping by every column against a scan, per engine (Capabilities.grouping_cost)"
COLUMNS = "reading_id, device_id, reading_at, reading_date, temperature, humidity, site, region, vendor"
#: The measured price may differ from the capability's by this factor before the goal is missed.
TOLERANCE = 1.5


def measure(engine: Any, rows: int) -> Dict[str, float]:
    """Seconds to scan the DT-shaped table of ``rows`` rows and to compute its difference."""
    suffix = f"{rows}"
    readings, devices, dt = f"bench.r{suffix}", f"bench.d{suffix}", f"bench.t{suffix}"
    engine.execute("CREATE SCHEMA IF NOT EXISTS bench")
    at = "timestamp_seconds(1700000000 + id * 30)"
    engine.execute(
        f"CREATE TABLE {readings} USING delta AS SELECT id AS reading_id, id % 2000 AS device_id, "
        f"{at} AS reading_at, to_date({at}) AS reading_date, CAST(20 + (id % 170) / 10.0 AS DOUBLE) "
        f"AS temperature, CAST(40 + (id % 500) / 10.0 AS DOUBLE) AS humidity FROM range({rows})"
    )
    engine.execute(
        f"CREATE TABLE {devices} USING delta AS SELECT id AS device_id, concat('site', id % 50) AS site, "
        f"concat('region', id % 5) AS region, concat('vendor', id % 7) AS vendor FROM range(2000)"
    )
    query = (
        f"SELECT r.*, d.site, d.region, d.vendor FROM {readings} r "
        f"JOIN {devices} d ON d.device_id = r.device_id"
    )
    engine.execute(f"CREATE TABLE {dt} USING delta AS {query}")
    scan = f"SELECT max(xxhash64({COLUMNS})) FROM {dt}"
    difference = (
        f"SELECT {COLUMNS}, sum(n) - sum(h) AS w FROM (SELECT {COLUMNS}, 1 AS n, 0 AS h FROM ({query}) q "
        f"UNION ALL SELECT {COLUMNS}, 0, 1 FROM {dt}) u GROUP BY {COLUMNS} HAVING sum(n) <> sum(h)"
    )
    return {"scan": _median(engine, scan), "difference": _median(engine, difference)}


def _median(engine: Any, sql: str) -> float:
    times = []
    for _ in range(4):
        started = time.perf_counter()
        engine.arrow(sql)
        times.append(time.perf_counter() - started)
    return statistics.median(times[1:])


def measure_engine(name: str, sizes: Sequence[int], spark_jars: Optional[Path]) -> Dict[str, Any]:
    """``{"rows": {n: timings}, "capability": float}`` for engine ``name``, or ``{"skipped": why}``."""
    if name == "embedded":
        with embedded_engine() as (engine, _):
            return _measured(engine, sizes)
    with jvm_engine(spark_jars, 300, "dyntable-bench-grouping-") as (engine, _, reason):
        if engine is None:
            return {"skipped": reason.splitlines()[0]}
        return _measured(engine, sizes)


def _measured(engine: Any, sizes: Sequence[int]) -> Dict[str, Any]:
    return {"rows": {n: measure(engine, n) for n in sizes}, "capability": engine.capabilities.grouping_cost}


def in_child(sizes: Sequence[int], spark_jars: Optional[Path]) -> Dict[str, Any]:
    """JVM Spark's measurements, from a child process."""
    command = [sys.executable, "-m", "benchmarks.grouping_cost", "--child", "--sizes", *map(str, sizes)]
    if spark_jars:
        command += ["--spark-jars", str(spark_jars)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"skipped": f"the child process failed: {done.stderr.strip().splitlines()[-1:]}"}
    measured: Dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return measured


def report(name: str, measured: Dict[str, Any], sizes: Sequence[int]) -> Tuple[Goal, List[Tuple[str, ...]]]:
    """The engine's goal (judged at the largest size, where fixed costs weigh least) and its rows
    of the timings' table."""
    goal = f"{name}: grouping_cost within {TOLERANCE}× of the cost measured at {max(sizes):,} rows"
    if "skipped" in measured:
        return Goal(goal, measured["skipped"], None), []
    rows = {int(n): t for n, t in measured["rows"].items()}
    capability = measured["capability"]
    table: List[Tuple[str, ...]] = [
        (name, f"{n:,}", ms(t["scan"]), ms(t["difference"]), f"{_per_byte(t):.1f}") for n, t in rows.items()
    ]
    ratio = _per_byte(rows[max(sizes)])
    met = capability / TOLERANCE <= ratio <= capability * TOLERANCE
    return Goal(goal, f"{ratio:.1f} a byte grouped; the capability says {capability:g}", met), table


def _per_byte(timings: Dict[str, float]) -> float:
    """A byte grouped against a byte scanned: the difference groups twice the table's bytes."""
    return timings["difference"] / (2 * timings["scan"])


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs=2, default=[1_000_000, 4_000_000])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    add_spark_jars_option(parser)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure_engine("jvm", args.sizes, args.spark_jars)))
        return
    console = Console()
    goals: List[Goal] = []
    timings: List[Tuple[str, ...]] = []
    for name, engine in (("embedded engine", "embedded"), ("JVM Spark", "jvm")):
        say(console, f"{name}: {' and '.join(f'{n:,}' for n in args.sizes)} rows")
        measured = (
            measure_engine(engine, args.sizes, None)
            if engine == "embedded"
            else in_child(args.sizes, args.spark_jars)
        )
        goal, table = report(name, measured, args.sizes)
        goals.append(goal)
        timings += table
        say(console, f"{name}: {goal.measured}")
    body = markdown_table(
        ["engine", "rows", "scan", "difference", "a byte grouped ÷ a byte scanned"], timings
    )
    command = f"python -m benchmarks.grouping_cost --sizes {' '.join(map(str, args.sizes))}"
    write_results(NAME, TITLE, command, " ".join(docstring_paragraphs(__doc__, 0, 1)), goals, body)


if __name__ == "__main__":
    main()
