"""A refresh after a long run of small commits (target: at most 2 s after 10,000 one-row commits,
with a bounded number of files open).

A source committed to row by row: three DTs over it (a group-by, a copy, a filter) refreshed, then
``--commits`` one-row commits written as a writer committing each event does (a Parquet file and a
JSON commit each, no checkpoint), then each DT refreshed once, in process on the embedded engine,
as a runner tick refreshes them: its wall time, and the most files the process (Sail's server
included, when it runs in the process) held open at once beyond what it held before. The first DT
reads the interval's commits; the others find it read (docs/ARCHITECTURE.md, "Reading sources").
The audit's DTs failed with "Too many open files" after 5,891 such commits, then took 9-13 s.

    python -m benchmarks.small_commits [--commits 10000]
"""

from __future__ import annotations

import argparse
import os
import socket
import threading
import time
from datetime import datetime, timezone
from typing import List, Tuple

import pyarrow as pa
from deltalake import write_deltalake

from dbt.adapters.dyntable.dynamic_table.lifecycle import RefreshRequest, Trigger
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService
from tests.functional.sources import one_row_commits

TARGET_SECONDS = 2.0
OPEN_FILES = 400
QUERIES = {
    "by_kind": "select kind, count(*) as n, sum(id) as ids from raw.events group by kind",
    "copy": "select id, kind from raw.events",
    "evens": "select id from raw.events where id % 2 = 0",
}


def open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


def refreshed(service: DynamicTableService, dt: DynamicTable) -> Tuple[float, int, str]:
    """One refresh of ``dt``: its seconds, the most files open beyond before, its action."""
    before, most, done = open_files(), [0], threading.Event()

    def sample() -> None:
        while not done.wait(0.001):
            most[0] = max(most[0], open_files())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    result = service.refresh(dt, RefreshRequest(datetime.now(timezone.utc), Trigger.SCHEDULED))
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    return seconds, max(most[0] - before, 0), str(result.action)


def main() -> None:
    from benchmarks.common import Goal, embedded_engine, events_service, markdown_table, write_results

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commits", type=int, default=10_000)
    parser.add_argument("--full", action="store_true", help="(the suite's flag: the same run)")
    args = parser.parse_args()
    with socket.socket() as probe:  # a server in this process: its open files are counted
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with embedded_engine(port) as (engine, warehouse):
        events = warehouse / "raw" / "events"
        write_deltalake(str(events), pa.table({"id": pa.array([0], pa.int64()), "kind": ["a"]}))
        service, config = events_service(engine, warehouse, events)
        dts = [DynamicTable("app", name, sql, config, model=name) for name, sql in QUERIES.items()]
        for dt in dts:
            service.refresh(dt, RefreshRequest(datetime.now(timezone.utc), Trigger.SCHEDULED))
        start = time.perf_counter()
        one_row_commits(events, 1, args.commits)
        written = time.perf_counter() - start
        time.sleep(2)  # the last commits' timestamps are behind the data timestamp
        rows: List[Tuple[str, str, str, str]] = []
        measured = [(dt.identifier, *refreshed(service, dt)) for dt in dts]
    for name, seconds, files, action in measured:
        rows.append((name, action, f"{seconds:.2f} s", f"{files}"))
        print(f"{name}: {action} in {seconds:.2f} s, at most {files} more files open")
    first, most = measured[0][1], max(m[2] for m in measured)
    write_results(
        "small_commits",
        "A refresh after a long run of small commits",
        f"python -m benchmarks.small_commits --commits {args.commits}",
        " ".join((__doc__ or "").split("\n\n")[1].split()),
        [
            Goal(
                f"the first refresh after {args.commits:,} one-row commits at most {TARGET_SECONDS:.0f} s",
                f"{first:.2f} s (the others {', '.join(f'{m[1]:.2f} s' for m in measured[1:])})",
                first <= TARGET_SECONDS,
            ),
            Goal(
                f"at most {OPEN_FILES} files open at once beyond the process's own",
                f"{most}",
                most <= OPEN_FILES,
            ),
        ],
        [f"The {args.commits:,} commits were written in {written:.1f} s.", ""]
        + markdown_table(["dynamic table", "action", "refresh", "more files open"], rows),
    )


if __name__ == "__main__":
    main()
