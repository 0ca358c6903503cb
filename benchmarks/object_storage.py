"""Object storage: what a refresh costs where users pay per request, and in each request's latency.

The warehouse is in an S3 API server on 127.0.0.1 (moto, credentials required), which counts the
requests it serves by kind and path and can add latency to each (docs/ARCHITECTURE.md, "Object
storage"). Three measurements, side by side in one run:

1. a NO_DATA decision: the requests its refresh makes per source, in a process that has read the
   source before (a runner) and in a fresh one (`dbt run`), and what it writes;
2. an INCREMENTAL refresh of 1,000 appended rows into a group-by DT over a fact table of each size,
   and over one refresh after another: its requests must not grow with the table or its history;
3. `dbt run` of DTs where no source changed, with every request delayed by 20 ms: NO_DATA per DT.

    .venv/bin/python -m benchmarks.object_storage --sizes 1000000 10000000 --refreshes 1000
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np
import pyarrow as pa

from benchmarks.common import Goal, docstring_paragraphs, markdown_table, write_results
from benchmarks.dbt_project import DbtProject
from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.dynamic_table.config import DynamicTableConfig, TargetLag
from dbt.adapters.dyntable.dynamic_table.lifecycle import RefreshRequest, Trigger
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.testing.s3_server import S3Server

GROUPS = 1000
CHANGED = 1000
WRITES = ("PUT", "POST", "DELETE")


def facts(rows: int, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + rows, dtype=np.int64)
    return pa.table({"id": ids, "k": ids % GROUPS, "amount": (ids % 97).astype(np.float64)})


def by_area(log: Sequence[str], warehouse_key: str) -> Counter[str]:
    """Requests by what they read: a source's log, the DT's, the metadata tables, locks, the
    claims a batch's end publishes for its NO_DATA refreshes decided without the lease, the saved
    views (listed once per schema and batch)."""
    areas: Counter[str] = Counter()
    for line in log:
        kind, path = line.split(" ", 1)
        path = path.replace("%2F", "/")
        if "/.locks/claims/" in path:
            area = "claims"
        elif "/.locks/" in path:
            area = "locks"
        elif "/.views/" in path:
            area = "views"
        elif "/dyntable_meta/" in path:
            area = "metadata"
        elif "/raw/" in path:
            area = "source"
        elif f"{warehouse_key}/bench/" in path:
            area = "DT"
        else:
            area = "other"
        areas[area] += 1
        if kind in WRITES:
            areas["writes"] += 1
    return areas


def forget_what_the_process_read(bench: "InProcess") -> None:
    """Drop what this process remembers of the logs it read, as a fresh process (a `dbt run`)
    has nothing: listings, commit identities and timestamps, snapshots, the views listed."""
    from dbt.adapters.dyntable.delta_log import commits, deltalake_snapshots, object_listing, snapshots

    caches: Sequence[Any] = (
        object_listing._object_listings,
        commits._object_commit_ids,
        commits._object_commit_icts,
        snapshots._shared_snapshots,
        deltalake_snapshots._replay_bases,
        snapshots._last_snapshots,
    )
    for cache in caches:
        for key in list(cache):
            cache.pop(key)
    bench.engine.forget_catalog()


class InProcess:
    """The embedded engine and a dynamic-table service on the server's warehouse."""

    def __init__(self, server: S3Server, name: str) -> None:
        from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService
        from dbt.adapters.dyntable.engines.embedded import EmbeddedEngine

        self.server = server
        self.key = f"bench_{name}"
        self.root = server.url(self.key)
        self.storage = storage.warehouse_storage(self.root, server.storage_options())
        self.engine = EmbeddedEngine(self.storage).start()
        self.service = DynamicTableService(self.engine, self.root, "dyntable_meta")
        self.engine.execute("create schema if not exists raw")
        self.engine.execute("create schema if not exists bench")

    def source(self, table: str, rows: pa.Table) -> None:
        from dbt.adapters.dyntable.engines.warehouse import PersistedTable

        location = f"{self.root}/raw/{table}"
        storage.write_delta(location, rows, mode="append")
        self.engine.execute(PersistedTable("raw", table, location).create_statement())

    def append(self, table: str, rows: pa.Table) -> None:
        storage.write_delta(f"{self.root}/raw/{table}", rows, mode="append")

    def refresh(self, dt: DynamicTable) -> Tuple[str, Counter[str], Counter[str]]:
        """One refresh in a batch: its action, its requests by area, and the batch end's."""
        self.server.reset()
        with self.service.batch():
            result = self.service.refresh(dt, RefreshRequest(datetime.now(timezone.utc), Trigger.SCHEDULED))
            during = by_area(self.server.request_log(), self.key)
            self.server.reset()
        return (
            str(result.action.value if result.action else result.state.value),
            during,
            by_area(self.server.request_log(), self.key),
        )

    def stop(self) -> None:
        self.engine.stop()


AREAS = ("source", "DT", "metadata", "locks", "views", "writes")


def table_row(size: int, label: str, during: Counter[str], end: Counter[str]) -> List[object]:
    return [f"{size:,}", label, *(during[a] for a in AREAS), end["writes"]]


@dataclass
class RequestCounts:
    """What the in-process refreshes asked of the store: a table row per refresh measured, whether
    each NO_DATA kept to its goal, the first INCREMENTAL's requests per fact size, and the
    requests of the refreshes one after another (refresh number, requests)."""

    rows: List[List[object]] = field(default_factory=list)
    no_data_within: List[bool] = field(default_factory=list)
    flat: Dict[int, int] = field(default_factory=dict)
    history: List[Tuple[int, int]] = field(default_factory=list)


def bench_in_process(server: S3Server, sizes: Sequence[int], refreshes: int) -> Tuple[List[Goal], List[str]]:
    counts = RequestCounts()
    for size in sizes:
        bench = InProcess(server, f"{size}_{int(time.time())}")
        try:
            count_requests(bench, size, refreshes if size == sizes[0] else 1, counts, size == sizes[0])
        finally:
            bench.stop()
    return in_process_goals(counts, sizes, refreshes), in_process_body(counts)


def count_requests(
    bench: InProcess, size: int, refreshes: int, counts: RequestCounts, first_size: bool
) -> None:
    """A group-by DT over a fact of ``size`` rows: its NO_DATA refreshes, warm and as a fresh
    process's, then ``refreshes`` INCREMENTAL ones, each after an append."""
    bench.source("facts", facts(size))
    sql = "select k, count(*) as n, sum(amount) as total from raw.facts group by k"
    dt = DynamicTable(
        "bench",
        "totals",
        sql,
        DynamicTableConfig(TargetLag.parse("1 minute"), refresh_mode="incremental"),
    )
    bench.refresh(dt)  # builds it
    for label in (
        "NO_DATA, the process read the source before",
        "NO_DATA, a fresh process's first look",
    ):
        if "fresh" in label:
            forget_what_the_process_read(bench)
        action, during, end = bench.refresh(dt)
        assert action == "NO_DATA", action
        counts.rows.append(table_row(size, label, during, end))
        counts.no_data_within.append(during["source"] <= 2 and during["writes"] == 0)
    for number in range(1, refreshes + 1):
        bench.append("facts", facts(CHANGED, start=size + number * CHANGED))
        action, during, end = bench.refresh(dt)
        assert action == "INCREMENTAL", action
        total = sum(v for k, v in during.items() if k != "writes")
        if number == 1:
            counts.flat[size] = total
            counts.rows.append(table_row(size, f"INCREMENTAL of {CHANGED:,} rows", during, end))
        if first_size and number in (1, 10, 100, 1000, refreshes):
            counts.history.append((number, total))


def in_process_goals(counts: RequestCounts, sizes: Sequence[int], refreshes: int) -> List[Goal]:
    flat, history = counts.flat, counts.history
    return [
        Goal(
            "a NO_DATA decision: ≤ 2 requests per source, and it writes nothing",
            "; ".join(
                f"{r[0]} rows, {'fresh process' if 'fresh' in str(r[1]) else 'warm'}: {r[2]} source "
                f"requests, {r[7]} writes"
                for r in counts.rows
                if "NO_DATA" in str(r[1])
            ),
            all(counts.no_data_within),
        ),
        Goal(
            f"an INCREMENTAL refresh of {CHANGED:,} rows: requests flat from {sizes[0]:,} to {sizes[-1]:,} rows",
            ", ".join(f"{s:,} rows: {n}" for s, n in flat.items()),
            max(flat.values()) <= min(flat.values()) * 1.1 + 1,
        ),
        Goal(
            f"... and flat over {refreshes:,} refreshes",
            ", ".join(f"refresh {n}: {t}" for n, t in history),
            max(t for _, t in history) <= history[0][1] * 1.2 + 2,
        ),
    ]


def in_process_body(counts: RequestCounts) -> List[str]:
    body = [
        "## Requests per refresh",
        "",
        'Each refresh in a batch of its own: "writes" are the refresh\'s (a NO_DATA takes no lease on '
        "object storage), \"batch end writes\" its batch's end's, which a `dbt run` or a runner tick "
        "makes once for all its DTs: the history and frontier commits (2 each: a data file and a "
        "commit) and, after NO_DATA decided without the lease, the claims object (created, deleted).",
        "",
    ]
    body += markdown_table(
        ["fact rows", "refresh", "source", "DT", "metadata", "locks", "views", "writes", "batch end writes"],
        counts.rows,
    )
    body += ["", "## INCREMENTAL refreshes one after another", ""]
    return body + markdown_table(["refresh", "requests"], counts.history)


def write_dbt_project(server: S3Server, key: str, dts: int) -> DbtProject:
    """``dts`` group-by DTs, each over a source of its own in the server's warehouse ``key``."""
    warehouse = server.url(key)
    storage.warehouse_storage(warehouse, server.storage_options())
    env = {**os.environ, **server.credentials(), "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
    project = DbtProject(
        Path(tempfile.mkdtemp(prefix="dyntable-s3-bench-")), "s3bench", "dev", warehouse, env
    )
    tables = "\n".join(f"      - name: t{i}" for i in range(dts))
    files = {
        "models/sources.yml": f"version: 2\nsources:\n  - name: raw\n    schema: raw\n    tables:\n{tables}\n"
    }
    for i in range(dts):
        storage.write_delta(f"{warehouse}/raw/t{i}", facts(10_000), mode="append")
        files[f"models/dt{i}.sql"] = (
            "{{ config(materialized='dynamic_table', target_lag='1 minute') }}\n"
            f"select k, count(*) as n from {{{{ source('raw', 't{i}') }}}} group by k"
        )
    output = {
        "type": "dyntable",
        "schema": "bench",
        "threads": 1,
        "warehouse": warehouse,
        "storage_options": server.storage_options(),
    }
    project.write(output, files)
    return project


def bench_dbt_run(server: S3Server, dts: int, latency_ms: float) -> Tuple[List[Goal], List[str]]:
    """NO_DATA per DT through `dbt run`, with no added latency and with ``latency_ms``."""
    key = f"bench_dbt_{int(time.time())}"
    project = write_dbt_project(server, key, dts)

    def run() -> Tuple[List[float], Counter[str], float]:
        server.reset()
        command, results = project.dbt("run")
        assert all(r.status == "success" for r in results)
        return [r.execution_time for r in results], by_area(server.request_log(), key), command.wall

    run()  # builds them
    rows: List[List[object]] = []
    by_what: List[List[object]] = []
    measured = {}
    for latency in (0.0, latency_ms):
        server.set_latency(latency)
        times, areas, wall = run()
        measured[latency] = statistics.median(times)
        by_what.append([f"{latency:.0f} ms", *(f"{areas[a] / dts:.1f}" for a in RUN_AREAS)])
        rows.append(
            [
                f"{latency:.0f} ms",
                f"{statistics.median(times) * 1000:.0f}",
                f"{max(times) * 1000:.0f}",
                f"{areas['source'] / dts:.1f}",
                f"{sum(v for k, v in areas.items() if k != 'writes') / dts:.0f}",
                areas["writes"],
                f"{wall:.1f}",
            ]
        )
    server.set_latency(0)
    return dbt_run_goals(measured, dts, latency_ms), dbt_run_body(rows, by_what, dts)


def dbt_run_goals(measured: Dict[float, float], dts: int, latency_ms: float) -> List[Goal]:
    return [
        Goal(
            f"NO_DATA through `dbt run` with +{latency_ms:.0f} ms a request: ≤ 100 ms per DT",
            f"{measured[latency_ms] * 1000:.0f} ms per DT (median of {dts}); {measured[0.0] * 1000:.0f} ms without the latency",
            measured[latency_ms] <= 0.1,
        )
    ]


#: What a `dbt run`'s requests read, per DT (:func:`by_area`).
RUN_AREAS = ("source", "DT", "metadata", "locks", "claims", "views", "other", "writes")


def dbt_run_body(rows: List[List[object]], by_what: List[List[object]], dts: int) -> List[str]:
    breakdown = [
        "",
        "Its requests by what they read, per DT. Most are the invocation's, not the refreshes': the "
        "engine's start re-attaches every table of the warehouse (each table's log read by "
        "`deltalake` and by Sail), the metadata tables are opened and read ahead, and the batch's "
        "end writes the history and frontiers once for all DTs.",
        "",
        *markdown_table(["added latency", *RUN_AREAS], by_what),
    ]
    body = [
        "",
        f"## `dbt run` of {dts} DTs, no source changed (a fresh process: every log read for the first time)",
        "",
    ]
    return (
        body
        + markdown_table(
            [
                "added latency",
                "model time per DT, median (ms)",
                "max (ms)",
                "source requests per DT",
                "requests per DT, all",
                "writes",
                "wall (s)",
            ],
            rows,
        )
        + breakdown
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--refreshes", type=int, help="one after another (default 200; --full: 1,000)")
    parser.add_argument("--dts", type=int, default=10)
    parser.add_argument("--latency-ms", type=float, default=20)
    parser.add_argument("--full", action="store_true", help="the suite's full profile: 1,000 refreshes")
    args = parser.parse_args()
    args.refreshes = args.refreshes or (1000 if args.full else 200)
    with S3Server() as server:
        os.environ.update(server.credentials())
        goals, body = bench_in_process(server, args.sizes, args.refreshes)
        more_goals, more_body = bench_dbt_run(server, args.dts, args.latency_ms)
    write_results(
        "object_storage",
        "Object storage: requests and latency",
        "python -m benchmarks.object_storage " + " ".join(sys.argv[1:]),
        docstring_paragraphs(__doc__, 1)[0],
        goals + more_goals,
        body + more_body,
    )


if __name__ == "__main__":
    main()
