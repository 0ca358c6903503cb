"""Benchmark 5: benchmark 1 on JVM Spark (the `session` engine) with delta-spark, where Delta's
jars resolve — there the change data feed is available.

Delta's jars come from Maven, or from a local folder: the `spark_jars` profile setting, given here
as ``--spark-jars DIR`` or the ``DYNTABLE_SPARK_JARS`` environment variable (a folder holding
delta-spark_2.13-<version>.jar and delta-storage-<version>.jar matching the installed
delta-spark). Where the engine cannot start, the result file says exactly why and nothing is
measured. Runs in a process of its own: PySpark cannot hold a JVM session beside the embedded
engine's Spark Connect session.

    .venv/bin/python -m benchmarks.jvm_spark [--full] [--sizes N ...] [--spark-jars DIR]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional, Sequence

from rich.console import Console

from benchmarks import refresh_vs_full
from benchmarks.common import (
    Goal,
    add_spark_jars_option,
    command_line,
    docstring_paragraphs,
    jvm_engine,
    write_results,
)

NAME = "jvm_spark"
TITLE = "Benchmark 5: incremental vs full refresh on JVM Spark (session engine)"


def parse(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--full", action="store_true", help="1M, 10M and 100M rows, every point")
    parser.add_argument("--sizes", type=int, nargs="+", help="override the fact sizes (a trial run)")
    add_spark_jars_option(parser)
    parser.add_argument("--start-timeout", type=float, default=60.0, help="seconds to wait for the JVM")
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse(argv)
    command = command_line(NAME, args.full, args.sizes)
    console = Console()
    sizes = args.sizes or ([1_000_000, 10_000_000, 100_000_000] if args.full else [1_000_000])
    with jvm_engine(args.spark_jars, args.start_timeout, "dyntable-bench-jvm-") as (
        engine,
        warehouse,
        reason,
    ):
        if engine is None:
            write_skipped(command, args.spark_jars, reason)
            console.print(f"benchmark 5 skipped: {reason.splitlines()[0]}")
            return
        points, no_data = refresh_vs_full.run(
            engine,
            warehouse,
            sizes,
            refresh_vs_full.full_points if args.full else refresh_vs_full.quick_points,
            console,
            # One round per point: a refresh here takes seconds, and three rounds would triple
            # the suite's longest part.
            rounds=1,
        )
    refresh_vs_full.summarize(
        points,
        no_data,
        sizes,
        NAME,
        TITLE,
        command,
        "Benchmark 1's sweep, same queries and changes, on JVM Spark with delta-spark.",
    )
    console.print(f"benchmark 5: {len(points)} points written")


def write_skipped(command: str, spark_jars: Optional[Path], reason: str) -> None:
    """The result files of a run where the session engine did not start, saying why."""
    where = (
        f"the `spark_jars` folder given ({spark_jars.name})"
        if spark_jars
        else "Maven (no `spark_jars` folder given)"
    )
    write_results(
        NAME,
        TITLE,
        command,
        docstring_paragraphs(__doc__, 1)[0],
        [
            Goal(
                "benchmark 1 on JVM Spark where Delta's jars resolve",
                f"skipped: the session engine did not start from {where}",
                None,
            )
        ],
        [
            "## Skipped",
            "",
            f"The session engine could not start: {reason}",
            "",
            "To run it, put delta-spark_2.13-<version>.jar and delta-storage-<version>.jar "
            "(matching the installed delta-spark) in a folder and run "
            "`python -m benchmarks.jvm_spark --spark-jars <folder>` (or set "
            "`DYNTABLE_SPARK_JARS=<folder>`; in a dbt profile the setting is `spark_jars`).",
        ],
    )


if __name__ == "__main__":
    main()
