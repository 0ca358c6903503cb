"""The path one INCREMENTAL refresh of a GROUP BY dynamic table takes through the package.

A source of ``--rows`` rows and a DT grouping it, refreshed once; then ``--changed`` rows appended
and the DT refreshed again, INCREMENTAL, in this process on the embedded engine, with a profiler
hook on every Python call. Of each call made in the package during that refresh, the chain of
package functions it runs under (from the service's ``refresh``, the pipeline's, down, in the refreshing
thread) is taken: a *hop* is a call on that chain into another stop. Two views: by file, every
package file is a stop; through the stages, each library below the stages (as docs/ARCHITECTURE.md,
"The refresh path", names them, and ``storage/`` under the engines) is one stop, whatever it calls
inside. The report names, per view, the chain with the most hops and
the stops it passes through (what carries the refresh), and every package file any call ran in
(the files touched). The goals are judged through the stages.

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
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import write_deltalake

import dbt.adapters.dyntable as package
from dbt.adapters.dyntable.dynamic_table.lifecycle import RefreshRequest, Trigger
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService

PACKAGE = Path(package.__file__).resolve().parent
QUERY = "select kind, count(*) as n, sum(id) as ids from raw.events group by kind"
#: docs/ARCHITECTURE.md's goal for the path (issue "One refresh, one short path").
MOST_HOPS, MOST_FILES = 10, 6

#: A stop on a chain: (package file, function).
Stop = Tuple[str, str]


#: The libraries below the stages, each one stop on the path through the stages.
LIBRARIES = (
    "differentiation/",
    "changes.py",
    "delta_log/",
    "dynamic_table/metadata/",
    "engines/",
    "storage/",
)


def by_file(where: str) -> str:
    return where


def through_the_stages(where: str) -> str:
    return next((library for library in LIBRARIES if where.startswith(library)), where)


View = Callable[[str], str]
VIEWS: Dict[str, View] = {"by file": by_file, "through the stages": through_the_stages}


@dataclass
class Trace:
    """What the profiler hook saw: per view, the chain with the most hops; the files touched."""

    thread: int
    longest: Dict[str, List[Stop]] = field(default_factory=lambda: {name: [] for name in VIEWS})
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
            for name, view in VIEWS.items():
                if hops(chain, view) > hops(self.longest[name], view):
                    self.longest[name] = chain


def _function(frame: FrameType) -> str:
    """The frame's function, with its class where it is a method (``co_qualname`` from 3.11)."""
    name: str = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
    return name


def _in_package(frame: FrameType) -> Optional[str]:
    path = Path(frame.f_code.co_filename)
    return path.relative_to(PACKAGE).as_posix() if path.is_relative_to(PACKAGE) else None


def crossings(chain: List[Stop], view: View) -> List[Stop]:
    """The chain's calls into another stop of ``view`` (its first call included), as
    (stop, function)."""
    stops = [(view(where), name) for where, name in chain]
    return [stop for i, stop in enumerate(stops) if i == 0 or stops[i - 1][0] != stop[0]]


def hops(chain: List[Stop], view: View) -> int:
    return max(len(crossings(chain, view)) - 1, 0)


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
    from benchmarks.common import embedded_engine, events_service

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
        service, config = events_service(engine, warehouse, events)
        dt = DynamicTable("app", "by_kind", QUERY, config, model="by_kind")
        service.refresh(dt, RefreshRequest(datetime.now(timezone.utc), Trigger.SCHEDULED))
        append(rows, changed)
        return traced_refresh(service, dt)


def main() -> None:
    from benchmarks.common import Goal, write_results

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--changed", type=int, default=1_000)
    parser.add_argument("--full", action="store_true", help="(the suite's flag: the same run)")
    args = parser.parse_args()
    trace, action = measured(args.rows, args.changed)
    paths = {name: crossings(trace.longest[name], view) for name, view in VIEWS.items()}
    counts = {name: (len(path) - 1, len({stop for stop, _ in path})) for name, path in paths.items()}
    said = "; ".join(f"{name}: {h} hops through {n} stops" for name, (h, n) in counts.items())
    print(f"{action}: {said}; {len(trace.touched)} files touched")
    stage_hops, stage_stops = counts["through the stages"]
    write_results(
        "refresh_path",
        "The path of one INCREMENTAL refresh",
        f"python -m benchmarks.refresh_path --rows {args.rows} --changed {args.changed}",
        " ".join((__doc__ or "").split("\n\n")[1].split()),
        [
            Goal("the refresh is INCREMENTAL", action, action == "INCREMENTAL"),
            Goal(f"at most {MOST_HOPS} hops", said, stage_hops <= MOST_HOPS),
            Goal(f"through at most {MOST_FILES} stops", said, stage_stops <= MOST_FILES),
        ],
        [line for name, path in paths.items() for line in _chain_table(name, path)]
        + [f"## Files touched ({len(trace.touched)})", ""]
        + [", ".join(f"`{where}`" for where in sorted(trace.touched))],
    )


def _chain_table(view: str, path: List[Stop]) -> List[str]:
    from benchmarks.common import markdown_table

    rows = [(i, stop, name) for i, (stop, name) in enumerate(path)]
    return (
        [f"## The chain with the most hops, {view}", ""]
        + markdown_table(["hop", "stop", "function"], rows, "rll")
        + [""]
    )


if __name__ == "__main__":
    main()
