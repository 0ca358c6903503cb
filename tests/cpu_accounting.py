"""Where the test suite's CPU goes, per test: ``pytest --cpu-report=PATH`` (see tests/conftest.py).

On two busy cores a test costs the run its CPU time, not its wall time: what it spends in this
process, in the engines it drives (the session's Spark driver or Sail server) and in the `dbt`,
`dyntable` and engine processes it starts. Each test's CPU is the growth, from its start to its
end, of this process tree's CPU: this process, the live processes under it, and those it and they
have reaped. Each pytest process (an xdist worker too) appends ``nodeid<TAB>wall<TAB>cpu`` lines
to ``PATH.<pid>``; ``python -m tests.cpu_accounting PATH...`` sums them by file (README, "Tests").
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import psutil
import pytest
from rich.markup import escape

from dbt.adapters.dyntable.cli.output import console, titled_table


def tree_cpu_seconds(process: psutil.Process) -> float:
    """CPU seconds of ``process``, its live descendants, and every process they reaped."""
    total = 0.0
    for member in [process, *process.children(recursive=True)]:
        try:
            times = member.cpu_times()
        except psutil.NoSuchProcess:  # ended between listing and reading: its parent counts it
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


class CpuReport:
    """The plugin: one line per test, appended to this process's report file."""

    def __init__(self, path: Path) -> None:
        self.process = psutil.Process()
        self.path = path.with_name(f"{path.name}.{self.process.pid}")
        self.started: Optional[Tuple[float, float]] = None

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.started = (time.monotonic(), tree_cpu_seconds(self.process))

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        if self.started is None:
            return
        wall, cpu = time.monotonic() - self.started[0], tree_cpu_seconds(self.process) - self.started[1]
        with self.path.open("a") as report:
            report.write(f"{nodeid}\t{wall:.2f}\t{cpu:.2f}\n")


def register(config: pytest.Config) -> None:
    """Install the plugin when ``--cpu-report`` names a path, in the processes that run tests:
    not in pytest-xdist's controller, whose tree holds its workers' (it would count them twice)."""
    path = config.getoption("--cpu-report")
    controller = getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput")
    if path and not controller:
        config.pluginmanager.register(CpuReport(Path(path).absolute()), "cpu-report")


def summarize(paths: List[Path], rows: int) -> None:
    """Per file: CPU and wall seconds and tests, the costliest first; then the costliest tests."""
    tests: List[Tuple[float, float, str]] = []
    for path in paths:
        for line in path.read_text().splitlines():
            nodeid, wall, cpu = line.split("\t")
            tests.append((float(cpu), float(wall), nodeid))
    files: Dict[str, List[Tuple[float, float, str]]] = defaultdict(list)
    for test in tests:
        files[test[2].split("::")[0]].append(test)
    by_file = titled_table(f"{len(tests)} tests: CPU by file", ("CPU s", "wall s", "tests", "file"))
    for name, of_file in sorted(files.items(), key=lambda item: -sum(t[0] for t in item[1]))[:rows]:
        cpu, wall = sum(t[0] for t in of_file), sum(t[1] for t in of_file)
        by_file.add_row(f"{cpu:.0f}", f"{wall:.0f}", str(len(of_file)), escape(name))
    console.print(by_file)
    console.print(f"total: {sum(t[0] for t in tests):.0f} CPU s, {sum(t[1] for t in tests):.0f} wall s")
    by_test = titled_table("the costliest tests", ("CPU s", "wall s", "test"))
    for cpu, wall, nodeid in sorted(tests, reverse=True)[:rows]:
        by_test.add_row(f"{cpu:.0f}", f"{wall:.0f}", escape(nodeid))  # ids hold [...]
    console.print(by_test)


if __name__ == "__main__":
    arguments = argparse.ArgumentParser(description=summarize.__doc__)
    arguments.add_argument("--rows", type=int, default=30, help="rows of each table")
    arguments.add_argument("paths", nargs="+", type=Path, help="report files (PATH.<pid>)")
    parsed = arguments.parse_args()
    summarize(parsed.paths, parsed.rows)
