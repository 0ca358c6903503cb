"""`python -m benchmarks.user_cost`: measure each engine at each size, then write the report."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Set, Tuple

from rich.console import Console

import benchmarks.user_cost
from benchmarks.common import RESULTS, add_spark_jars_option, command_line, utc_minute
from benchmarks.fact_project import FactProject
from benchmarks.user_cost.embedded import measure_embedded
from benchmarks.user_cost.jvm import measure_jvm
from benchmarks.user_cost.models import models_for
from benchmarks.user_cost.parameters import ENGINES, HISTORY, NAME
from benchmarks.user_cost.recorder import Recorder
from benchmarks.user_cost.report import report
from benchmarks.user_cost.results import Results

#: The last run's measurements, which --report-only and --keep-unmeasured read.
RAW = RESULTS / f"{NAME}.json"


def parse(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.user_cost",
        description=(benchmarks.user_cost.__doc__ or "").splitlines()[0],
    )
    parser.add_argument("--full", action="store_true", help="1M, 10M and 100M rows; history at every size")
    parser.add_argument("--sizes", type=int, nargs="+", help="override the fact sizes (a trial run)")
    parser.add_argument("--history", type=int, default=HISTORY, help="earlier refreshes (a trial run)")
    parser.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES))
    add_spark_jars_option(parser)
    parser.add_argument(
        "--keep-unmeasured",
        action="store_true",
        help=f"keep results/{NAME}.json's measurements of the engines and sizes not measured this time",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help=f"rewrite the report from results/{NAME}.json (the last run's measurements) without measuring",
    )
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse(argv)
    history = [f"--history {args.history}"] if args.history != HISTORY else []
    command = command_line(NAME, args.full, args.sizes, *history)
    if args.report_only:
        saved = Results.load(RAW)
        report(saved, (saved.command or command) + " (report rewritten with --report-only)")
        return 0
    sizes: List[int] = args.sizes or (
        [1_000_000, 10_000_000, 100_000_000] if args.full else [1_000_000, 10_000_000]
    )
    # A quick run measures history at its smallest size up to 1M: none in a re-run of 100M alone.
    history_sizes = sizes if args.full else sorted(s for s in sizes if s <= 1_000_000)[:1]
    results = Results(sorted(sizes), history_sizes)
    console = Console()
    measured = measure(args, sizes, results, Recorder(results, console), console)
    RESULTS.mkdir(parents=True, exist_ok=True)
    if args.keep_unmeasured and RAW.exists():
        results = results.keeping(Results.load(RAW), measured)
        command += f" --engines {' '.join(args.engines)} --keep-unmeasured"
    results.command = command
    results.save(RAW)
    report(results, command)
    console.print(f"{NAME}: {len(results.measures)} model timings written")
    return 1 if results.failures else 0


def measure(
    args: argparse.Namespace, sizes: List[int], results: Results, recorder: Recorder, console: Console
) -> Set[Tuple[str, int]]:
    """Each engine asked for at each of its ``sizes``, in their order; the (engine, size) pairs
    measured."""
    scratch = Path(tempfile.mkdtemp(prefix="dyntable-bench-user-"))
    measured: Set[Tuple[str, int]] = set()

    def measure_one(engine: str, rows: int, run: Callable[[FactProject], None]) -> None:
        """One engine at one size; a failure is reported, and the other sizes still run."""
        measured.add((engine, rows))
        project = FactProject(scratch / f"{engine}-{rows}", engine, rows, args.spark_jars, models_for(engine))
        try:
            run(project)
        except Exception as exc:  # noqa: BLE001 - reported with the results
            results.failures.append(f"{engine}, {rows:,} rows: {exc}")
            console.print(f"[bold red]{engine}, {rows:,} rows failed:[/] {exc}")
        finally:
            results.measured_at[f"{engine} {rows}"] = utc_minute()
            shutil.rmtree(project.root, ignore_errors=True)

    def embedded(project: FactProject) -> None:
        measure_embedded(recorder, project, args.history if project.rows in results.history_sizes else None)

    try:
        if "embedded" in args.engines:
            for rows in sizes:
                measure_one("embedded", rows, embedded)
        if "jvm" not in args.engines:
            results.jvm_skipped = "not asked for (--engines)"
        elif not args.spark_jars:
            results.jvm_skipped = (
                "DYNTABLE_SPARK_JARS is not set (JVM Spark needs a folder of Delta's jars: "
                "these machines cannot reach Maven)"
            )
        else:
            # JVM Spark at the sizes up to 1M (10M with --full): its refreshes cost seconds each.
            limit = 10_000_000 if args.full else 1_000_000
            for rows in [s for s in sizes if s <= limit] or sizes[:1]:
                results.jvm_sizes.append(rows)
                measure_one("jvm", rows, lambda project: measure_jvm(recorder, project))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return measured


if __name__ == "__main__":
    sys.exit(main())
