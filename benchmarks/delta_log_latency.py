"""How long Delta log questions take on a table with ~200 commits.

A NO_DATA refresh must cost under 50 ms in total, and it asks exactly: "which version was current
at T?" and "did anything change since the consumed version?". This prints the median latency of
those calls, of the intervals an incremental refresh computes, and of loading the table with
`deltalake` (what a listing-based `latest_version()` avoids), on fresh tables in a temp directory.
Last, the first question after one more commit: answered by extending the listing taken before it,
and by listing the log whole, which the first question after each commit did before
(docs/ARCHITECTURE.md, "Reading sources"); a log keeps 30 days of commits by default, so
``--commits 20000`` is a table written every two minutes.

Interval cost is dominated by rebuilding the two snapshots, i.e. by how many JSON commits follow
the last checkpoint: Spark and Sail checkpoint every 10 commits, `deltalake` every 100, so the
script measures both. Then a runner's next tick: the interval over one more append on a log that
holds the version before it, the new version applied to the held one or loaded by `deltalake`,
on this table and on one partitioned by day (whose partition values are typed when applied).

    python benchmarks/delta_log_latency.py [--commits 200] [--repeat 20]
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from dbt.adapters.dyntable.delta_log import DeltaLog, listing, snapshots


def appended_rows(first: int, partitioned: bool) -> pa.Table:
    """Ten rows from id ``first``; partitioned, with a ``day`` among 30."""
    ids = list(range(first, first + 10))
    columns: Dict[str, List[Any]] = {"id": ids, "v": ids}
    if partitioned:
        columns["day"] = [dt.date(2026, 1, 1) + dt.timedelta(days=first // 10 % 30)] * 10
    return pa.table(columns)


def build_table(location: Path, commits: int, checkpoint_interval: int, partitioned: bool = False) -> None:
    """Appends of 10 rows each, with an update every 20 commits (copy-on-write rewrites)."""
    config = {"delta.checkpointInterval": str(checkpoint_interval)}
    for i in range(commits):
        if i and i % 20 == 0:
            DeltaTable(location).update(updates={"v": "v + 1"}, predicate=f"id = {i - 1}")
        else:
            write_deltalake(
                location,
                appended_rows(i * 10, partitioned),
                mode="append",
                configuration=config,
                partition_by=["day"] if partitioned else None,
            )


def median_ms(call: Callable[[], object], repeat: int) -> float:
    samples: List[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def after_a_commit_ms(location: Path, repeat: int, listed_whole: bool) -> float:
    """The median time of the first ``latest_version()`` after an append (the append not timed)."""
    samples: List[float] = []
    for _ in range(repeat):
        DeltaLog(location).latest_version()  # the listing a process holds from before the commit
        write_deltalake(location, pa.table({"id": [0], "v": [0]}), mode="append")
        if listed_whole:
            listing._listings.pop(str(location / "_delta_log"))
        start = time.perf_counter()
        DeltaLog(location).latest_version()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def next_version_ms(location: Path, repeat: int, partitioned: bool, applied: bool) -> float:
    """The median time of the interval over one more append (the append not timed), on a log
    holding the version before it: a runner's next tick over a source. The new version is
    applied to the held snapshot, or (``applied`` off) loaded by ``deltalake``."""
    samples: List[float] = []
    held_back = snapshots.APPLIED_COMMITS
    try:
        snapshots.APPLIED_COMMITS = held_back if applied else 0
        for _ in range(repeat):
            log = DeltaLog(location)
            before = log.latest_version()
            log.snapshot(before)
            write_deltalake(location, appended_rows(10**9 + before * 10, partitioned), mode="append")
            start = time.perf_counter()
            log.interval(before, before + 1)
            samples.append((time.perf_counter() - start) * 1000)
    finally:
        snapshots.APPLIED_COMMITS = held_back
    return statistics.median(samples)


def measure(location: Path, commits: int, checkpoint_interval: int, repeat: int) -> None:
    build_table(location, commits, checkpoint_interval)
    log = DeltaLog(location)
    latest = log.latest_version()
    now_ms = int(time.time() * 1000)
    checkpoints = len(list((location / "_delta_log").glob("*.checkpoint*")))
    print(
        f"\n{latest + 1} versions, {len(log.files_at(latest))} live files, "
        f"checkpoint every {checkpoint_interval} commits ({checkpoints} checkpoints)"
    )

    def no_data_refresh() -> None:
        fresh = DeltaLog(location)
        v1 = fresh.version_at(now_ms)
        assert v1 is not None
        fresh.interval(v1, v1)

    update = 20 * (commits // 20 - 1)
    rows = [
        ("deltalake: DeltaTable(location).version()", lambda: DeltaTable(location).version()),
        ("latest_version()", lambda: DeltaLog(location).latest_version()),
        ("version_at(now)", lambda: DeltaLog(location).version_at(now_ms)),
        ("NO_DATA check: version_at + interval(v, v)", no_data_refresh),
        (
            "interval(latest-1, latest), cold (append)",
            lambda: DeltaLog(location).interval(latest - 1, latest),
        ),
        (
            f"interval({update - 1}, {update}), cold (update)",
            lambda: DeltaLog(location).interval(update - 1, update),
        ),
        ("interval(0, latest), cold (whole history)", lambda: DeltaLog(location).interval(0, latest)),
        ("interval(latest-1, latest), warm (cached snapshots)", lambda: log.interval(latest - 1, latest)),
    ]
    after = [
        ("latest_version() after a commit: listing extended", False),
        ("latest_version() after a commit: log listed whole", True),
    ]
    partitioned = location.with_name(location.name + "_by_day")
    next_versions = [
        (f"next version, {kind}: {how}", table, applied)
        for table, kind in ((location, "unpartitioned"), (partitioned, "partitioned by day"))
        for applied, how in ((True, "applied to the held one"), (False, "loaded by deltalake"))
    ]
    labels = [label for label, _ in rows] + [label for label, _ in after] + [n[0] for n in next_versions]
    width = max(len(label) for label in labels)
    for label, call in rows:
        print(f"  {label:<{width}}  {median_ms(call, repeat):8.2f} ms")
    for label, listed_whole in after:  # last: they append to the table
        print(f"  {label:<{width}}  {after_a_commit_ms(location, repeat, listed_whole):8.2f} ms")
    build_table(partitioned, commits, checkpoint_interval, partitioned=True)
    for label, table, applied in next_versions:
        elapsed = next_version_ms(table, repeat, table == partitioned, applied)
        print(f"  {label:<{width}}  {elapsed:8.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    if args.commits < 40:
        parser.error("--commits must be at least 40 (the table gets an update every 20 commits)")
    with tempfile.TemporaryDirectory() as tmp:
        for interval in (10, 100):
            measure(Path(tmp) / f"every_{interval}", args.commits, interval, args.repeat)


if __name__ == "__main__":
    main()
