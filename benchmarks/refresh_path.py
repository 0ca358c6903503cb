"""The path one INCREMENTAL refresh of a GROUP BY dynamic table takes through the package.

A source of ``--rows`` rows and a DT grouping it, refreshed once; then ``--changed`` rows appended
and the DT refreshed again, INCREMENTAL, in this process on the embedded engine, with a profiler
hook on every Python call. Of each call made in the package during that refresh, the chain of
package functions it runs under (from ``DynamicTableService.refresh`` down, in the refreshing
thread) is taken: a *hop* is a call on that chain into another of the package's files. The
report names the chain with the most hops, the files it passes through (the files carrying the
refresh), and every package file any call ran in (the files touched), as docs/ARCHITECTURE.md
("The refresh path") counts them.

    python -m benchmarks.refresh_path [--rows 100000] [--changed 1000]
"""

from __future__ import annotations

import argparse
import sys
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from types import FrameType
from typing import Any, List, Optional, Set, Tuple

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import write_deltalake

import dbt.adapters.dyntable as package
from dbt.adapters.dyntable.differentiation.derivative import RULES
from dbt.adapters.dyntable.dynamic_table.config import DynamicTableConfig
from dbt.adapters.dyntable.dynamic_table.lifecycle import RefreshRequest, Trigger
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService

PACKAGE = Path(package.__file__).resolve().parent
QUERY = "select kind, count(*) as n, sum(id) as ids from raw.events group by kind"
#: docs/ARCHITECTURE.md's goal for the path (issue "One refresh, one short path").
MOST_HOPS, MOST_FILES = 10, 6

#: A stop on a chain: (package file, function).
Stop = Tuple[str, str]


@dataclass
class Trace:
    """What the profiler hook saw: the chain with the most hops, and the files touched."""

    thread: int
    longest: List[Stop] = field(default_factory=list)
    touched: Set[str] = field(default_factory=set)

    def chain(self, frame: Optional[FrameType]) -> List[Stop]:
        """The package frames ``frame`` runs under, outermost first."""
        stops: List[Stop] = []
        while frame is not None:
            where = _in_package(frame)
            if where is not None:
                stops.append((where, _function(frame)))
            frame = frame.f_back
        return stops[::-1]

    def hook(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call":
            return
        where = _in_package(frame)
        if where is None:
            return
        self.touched.add(where)
        if threading.get_ident() == self.thread:
            chain = self.chain(frame)
            if hops(chain) > hops(self.longest):
                self.longest = chain


def _function(frame: FrameType) -> str:
    """The frame's function, with its class where it is a method (``co_qualname`` from 3.11)."""
    name: str = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
    return name


def _in_package(frame: FrameType) -> Optional[str]:
    path = Path(frame.f_code.co_filename)
    return path.relative_to(PACKAGE).as_posix() if path.is_relative_to(PACKAGE) else None


def crossings(chain: List[Stop]) -> List[Stop]:
    """The chain's stops where it enters another file (its first stop included)."""
    return [stop for i, stop in enumerate(chain) if i == 0 or chain[i - 1][0] != stop[0]]


def hops(chain: List[Stop]) -> int:
    return max(len(crossings(chain)) - 1, 0)


def folded(chain: List[Stop]) -> List[Stop]:
    """The chain with the derivative's descent through the query's operators (``derivative.py``
    and its rules, one module per operator, docs/ARCHITECTURE.md) taken as one file: what the
    path costs apart from the query's own depth."""
    rules = {f"differentiation/{Path(rule.__file__ or '').name}" for rule in RULES}
    rules.add("differentiation/derivative.py")
    return [("differentiation/ (rules)", name) if where in rules else (where, name) for where, name in chain]


def traced_refresh(service: DynamicTableService, dt: DynamicTable) -> Tuple[Trace, str]:
    """One refresh of ``dt`` under the profiler hook, in every thread it starts: the trace and
    the action taken."""
    trace = Trace(threading.get_ident())
    threading.setprofile(trace.hook)
    sys.setprofile(trace.hook)
    try:
        result = service.refresh(dt, RefreshRequest(datetime.now(timezone.utc), Trigger.SCHEDULED))
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return trace, str(result.action)


def measured(rows: int, changed: int) -> Tuple[Trace, str]:
    from benchmarks.common import embedded_engine

    with embedded_engine() as (engine, warehouse):
        events = warehouse / "raw" / "events"

        def append(start: int, count: int) -> None:
            ids = pa.array(range(start, start + count), pa.int64())
            write_deltalake(
                str(events),
                pa.table({"id": ids, "kind": pc.cast(pc.bit_wise_and(ids, 7), pa.string())}),
                mode="append",
            )

        append(0, rows)
        engine.execute("create schema if not exists raw")
        engine.execute(f"create table raw.events using delta location '{events}'")
        engine.execute("create schema if not exists app")
        service = DynamicTableService(engine, warehouse, "dyntable_meta")
        config = DynamicTableConfig.from_model(
            "bench", {"target_lag": "1 minute", "refresh_mode": "incremental"}
        )
        dt = DynamicTable("app", "by_kind", QUERY, config, model="by_kind")
        service.refresh(dt, RefreshRequest(datetime.now(timezone.utc), Trigger.SCHEDULED))
        append(rows, changed)
        return traced_refresh(service, dt)


def main() -> None:
    from benchmarks.common import Goal, markdown_table, write_results

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--changed", type=int, default=1_000)
    parser.add_argument("--full", action="store_true", help="(the suite's flag: the same run)")
    args = parser.parse_args()
    trace, action = measured(args.rows, args.changed)
    path = crossings(trace.longest)
    files = sorted({where for where, _ in path})
    folded_files = len({where for where, _ in folded(path)})
    apart = f"{hops(folded(trace.longest))} hops through {folded_files} files with the rules as one"
    print(
        f"{action}: {hops(trace.longest)} hops through {len(files)} files ({apart}), {len(trace.touched)} files touched"
    )
    write_results(
        "refresh_path",
        "The path of one INCREMENTAL refresh",
        f"python -m benchmarks.refresh_path --rows {args.rows} --changed {args.changed}",
        " ".join((__doc__ or "").split("\n\n")[1].split()),
        [
            Goal("the refresh is INCREMENTAL", action, action == "INCREMENTAL"),
            Goal(
                f"at most {MOST_HOPS} hops",
                f"{hops(trace.longest)} ({apart})",
                hops(trace.longest) <= MOST_HOPS,
            ),
            Goal(f"through at most {MOST_FILES} files", str(len(files)), len(files) <= MOST_FILES),
        ],
        ["## The chain with the most hops", ""]
        + markdown_table(
            ["hop", "file", "function"], [(i, where, name) for i, (where, name) in enumerate(path)]
        )
        + ["", f"## Files touched ({len(trace.touched)})", ""]
        + [
            f"`{where}`" + ("  " if i < len(trace.touched) - 1 else "")
            for i, where in enumerate(sorted(trace.touched))
        ],
    )


if __name__ == "__main__":
    main()
