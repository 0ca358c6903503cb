"""The benchmark suite of issue 6 in one command.

    .venv/bin/python -m benchmarks            # quick profile (1M and 10M rows)
    .venv/bin/python -m benchmarks --full     # full profile (adds 100M rows and every change fraction)
    .venv/bin/python -m benchmarks --summary  # SUMMARY.md again from the results there, running nothing

Each benchmark runs in a process of its own (the embedded engine and JVM Spark cannot share one) and
writes benchmarks/results/<name>.md, <name>.goals.json and, where it has one, <name>.png; this writes
benchmarks/results/SUMMARY.md: when and how each benchmark last ran, every goal, met ✓ or missed ✗
with the real number, and the suite run's wall and CPU seconds per benchmark. A benchmark re-run on
its own (other sizes, after a change) joins the summary with `--summary`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from benchmarks.common import RESULTS, Goal, markdown_table, utc_minute, write_goals

ROOT = Path(__file__).resolve().parent.parent
#: (module, what it measures, takes --full)
BENCHMARKS: List[Tuple[str, str, bool]] = [
    ("planning", "planning a 10-join query", False),
    ("runner_overhead", "runner scheduling and NO_DATA ticks", False),
    ("refresh_vs_full", "1–2: incremental vs full vs auto; NO_DATA", True),
    ("hand_written", "3: DT vs hand-written merge model", True),
    ("runner_lag", "4: runner lag under steady ingest", True),
    ("jvm_spark", "5: benchmark 1 on JVM Spark", True),
    ("user_cost", "what users pay: `dbt run` and `dyntable run` per model", True),
    ("compaction", "a DT's small files, its compactions, a source compacted by its owner", False),
    ("change_feed", "6: change data feed vs file-set diff (JVM Spark)", True),
    (
        "user_shaped",
        "issue 53: a user-shaped project's refresh actions; rebuilt table models, one-file sources",
        False,
    ),
    ("delta_log_latency", "Delta log question latency", False),
    ("object_storage", "requests per refresh and NO_DATA under latency, warehouse in S3", True),
    ("small_commits", "a refresh after 10,000 one-row commits", False),
    ("refresh_path", "the package's path for one INCREMENTAL refresh: hops and files", False),
    ("grouping_cost", "AUTO's price of grouping by every column, per engine", False),
]
#: The last suite run: its profile, when it ran, the machine's load, each benchmark's exit and cost.
SUITE = RESULTS / "suite.json"
#: Benchmarks that print their results rather than writing a goal table: their output is kept as is.
PRINTED = {"delta_log_latency"}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_one(module: str, full: bool) -> Tuple[int, float, float, str]:
    """Run ``benchmarks.<module>``; its output streams to this terminal (and is kept for PRINTED)."""
    command = [sys.executable, "-m", f"benchmarks.{module}"] + (["--full"] if full else [])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    wall, cpu = time.perf_counter(), children_cpu()
    if module in PRINTED:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        output = done.stdout + ("\n" + done.stderr if done.returncode else "")
        print(done.stdout, end="")
    else:
        done = subprocess.run(command, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
        # Sail logs a warning line for every task it aborts at shutdown: keep only real errors.
        output = "\n".join(line for line in done.stderr.splitlines() if " WARN " not in line)
        if done.returncode:
            print(output, file=sys.stderr)
    return done.returncode, time.perf_counter() - wall, children_cpu() - cpu, output


def write_printed(module: str, description: str, output: str) -> None:
    command = f"python -m benchmarks.{module}"
    produced = utc_minute()
    (RESULTS / f"{module}.md").write_text(
        f"# {description}\n\nProduced by `{command}` on {produced} UTC.\n\n```\n{output.strip()}\n```\n"
    )
    write_goals(module, description, command, produced, [])


def summary() -> str:
    """SUMMARY.md from the results folder: each benchmark's last run, its goals, the suite's cost."""
    suite = json.loads(SUITE.read_text()) if SUITE.exists() else None
    results = {
        module: json.loads(path.read_text())
        for module, _, _ in BENCHMARKS
        if (path := RESULTS / f"{module}.goals.json").exists()
    }
    lines = ["# Benchmark summary", ""]
    if suite:
        lines += [
            f"The last suite run: `{suite['command']}` on {suite['produced']} UTC, {suite['cores']} cores, "
            f"{suite['minutes']:.1f} minutes of wall clock; 1-min load average {suite['load_before']:.2f} "
            f"when it started and {suite['load_after']:.2f} when it ended (other work shared the machine "
            "where it is above ~1). A benchmark re-run since on its own shows its later run below. "
            "Embedded engine (LakeSail Sail, in-process) unless a benchmark says JVM Spark.",
            "",
        ]
    lines += runs_section(results) + goals_section(results)
    if suite:
        lines += cost_section(suite)
    return "\n".join(lines) + "\n"


def runs_section(results: Dict[str, Dict[str, Any]]) -> List[str]:
    """When and by which command each benchmark last ran."""
    return ["## Runs", ""] + markdown_table(
        ["benchmark", "measures", "run (UTC)", "command"],
        [
            (
                f"[{module}]({module}.md)",
                description,
                results[module].get("produced", "–"),
                f"`{results[module]['command']}`",
            )
            for module, description, _ in BENCHMARKS
            if module in results
        ],
        "llll",
    )


def goals_section(results: Dict[str, Dict[str, Any]]) -> List[str]:
    """Every benchmark's goals, met or missed, with the real numbers."""
    rows = [
        (f"[{module}]({module}.md)", goal["goal"], goal["measured"], Goal(**goal).mark)
        for module, result in results.items()
        for goal in result["goals"]
    ]
    return ["", "## Goals", ""] + markdown_table(["benchmark", "goal", "measured", ""], rows, "llll")


def cost_section(suite: Dict[str, Any]) -> List[str]:
    """The last suite run's wall and CPU seconds per benchmark."""
    lines = [
        "",
        f"## Cost of each benchmark in the suite run of {suite['produced']}",
        "",
        "CPU is the benchmark process's user+system seconds (the embedded engine runs inside it).",
        "",
    ]
    return lines + markdown_table(
        ["benchmark", "measures", "exit", "wall s", "CPU s"],
        [
            (
                f"[{r['module']}]({r['module']}.md)",
                r["description"],
                "ok" if r["exit"] == 0 else f"failed ({r['exit']})",
                f"{r['wall']:.0f}",
                f"{r['cpu']:.0f}",
            )
            for r in suite["runs"]
        ],
        "llrrr",
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    profile = parser.add_mutually_exclusive_group()
    profile.add_argument("--quick", action="store_true", help="the quick profile (the default)")
    profile.add_argument("--full", action="store_true", help="the full profile: 100M rows, every point")
    profile.add_argument(
        "--summary", action="store_true", help="write SUMMARY.md from the results there, running nothing"
    )
    args = parser.parse_args(argv)
    console = Console()
    RESULTS.mkdir(parents=True, exist_ok=True)
    if args.summary:
        (RESULTS / "SUMMARY.md").write_text(summary())
        console.print(f"see {RESULTS / 'SUMMARY.md'}")
        return 0
    load_before = os.getloadavg()[0]
    runs = []
    started = time.perf_counter()
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        task = progress.add_task("benchmark suite", total=len(BENCHMARKS))
        for module, description, takes_full in BENCHMARKS:
            progress.update(task, description=f"suite: {description}")
            rc, wall, cpu, output = run_one(module, args.full and takes_full)
            if module in PRINTED and rc == 0:
                write_printed(module, description, output)
            runs.append((module, description, rc, wall, cpu))
            progress.console.print(
                f"{module}: {'ok' if rc == 0 else f'FAILED ({rc})'}, {wall:.0f} s wall, {cpu:.0f} s CPU"
            )
            progress.advance(task)
    total = time.perf_counter() - started
    suite = {
        "command": f"python -m benchmarks{' --full' if args.full else ''}",
        "produced": utc_minute(),
        "cores": os.cpu_count(),
        "minutes": total / 60,
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
        "runs": [{"module": m, "description": d, "exit": rc, "wall": w, "cpu": c} for m, d, rc, w, c in runs],
    }
    SUITE.write_text(json.dumps(suite, indent=1) + "\n")
    (RESULTS / "SUMMARY.md").write_text(summary())
    console.print(f"suite done in {total / 60:.1f} minutes: see {RESULTS / 'SUMMARY.md'}")
    return 0 if all(rc == 0 for _, _, rc, _, _ in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
