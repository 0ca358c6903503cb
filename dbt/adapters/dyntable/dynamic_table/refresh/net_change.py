"""Stage 1b, measure: the net change of a rewritten input (docs/ARCHITECTURE.md, "Rewritten
inputs").

A `table` model rebuilt by every `dbt run`, a seed reloaded, a DT that refreshed FULL, a big file
rewritten by a copy-on-write UPDATE: the log shows every row of the rewritten files removed and
added again, while the rows that differ are few or none. Left to the delta query, those rows would
be read and cancelled inside it, as often as the query reads the source's changes, and AUTO would
price the change at the rewritten files' size and recompute. So before deciding, a refresh reads
such an input's net change once (the rewritten files of both versions, grouped by every column to
cancel the copies: in this process with Arrow where they are small, else one engine job) and
keeps it in this process when it is small. The decision then knows the real change: none (the
input counts as unchanged), inserts only, or a few rows, and the delta query reads those rows
from memory instead of the rewritten files.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Optional, Set

import pyarrow as pa
import pyarrow.compute as pc

from dbt.adapters.dyntable import data_files
from dbt.adapters.dyntable.changes import SourceReads, changes_in_process, interval_reads, register_changes
from dbt.adapters.dyntable.data_files import NotReadableInProcess
from dbt.adapters.dyntable.delta_log import DeltaLog, Interval, IntervalKind
from dbt.adapters.dyntable.delta_log.intervals import IntervalIdentity
from dbt.adapters.dyntable.delta_log.lru import Lru
from dbt.adapters.dyntable.differentiation.plan import Plan, Scan
from dbt.adapters.dyntable.dynamic_table.refresh.facts import (
    NET_CHANGE_MAX_ROWS,
    NetChange,
    Observation,
    SourceState,
)
from dbt.adapters.dyntable.dynamic_table.refresh.planned_query import PlannedOrNot, PlannedQuery
from dbt.adapters.dyntable.engines.base import Engine
from dbt.adapters.dyntable.vocabulary import WEIGHT, fingerprint, table_name

#: A rewrite reads at least this many times more rows than its writers say they changed.
REWRITE_AMPLIFICATION = 4
#: Net changes measured by this process, keyed by the table's location and both ends' versions
#: and commits: the DTs of one run over one rebuilt table model measure its change once, not
#: once each (docs/ARCHITECTURE.md, "Rewritten inputs"). A few, of at most KEPT_BYTES each: a
#: runner lives for weeks.
_measured_here: "Lru[IntervalIdentity, NetChange]" = Lru(8)
KEPT_BYTES = 16 << 20


def rewrites(interval: Optional[Interval]) -> bool:
    """Whether ``interval`` rewrote files whose rows mostly did not change: it removed and added
    files (MIXED), and they hold many more rows than its writers say they changed, or the writers
    did not say (an overwrite, a REPLACE)."""
    if interval is None or not interval.differentiable or interval.kind is not IntervalKind.MIXED:
        return False
    changed = interval.changed_rows
    if changed is None:
        return True
    read = (interval.added_rows or 0) + (interval.removed_rows or 0)
    return read >= REWRITE_AMPLIFICATION * max(changed, 1)


def measured(
    engine: Engine,
    owner: str,
    observed: Observation,
    dt_log: Optional[DeltaLog],
    plan: Callable[[], PlannedOrNot],
) -> Observation:
    """``observed``, each source whose interval :func:`rewrites` files with its
    :class:`NetChange`, where an earlier refresh in this process measured it, or where reading
    it (both versions of the rewritten files, grouped) costs no more than recomputing the DT
    (reading every source, and the DT's rows to compare them with: a rebuild writes only the rows
    that differ), then seen through the columns ``plan``'s query reads (:func:`read_through`).
    ``owner`` (the DT) names the temp view it is read through, which the DT's lock keeps to one
    refresh at a time."""
    candidates = [s for s in observed.sources if rewrites(s.interval)]
    if not candidates or observed.dt_changed or any(s.lost for s in observed.sources):
        return observed  # nothing rewritten, or the DT rebuilds anyway
    recompute = sum(s.log.size_bytes(s.end) for s in observed.sources)
    recompute += dt_log.size_bytes(dt_log.latest_version()) if dt_log is not None else 0
    # Both read and group about as many bytes: the rewritten files' two versions, against the
    # sources and the DT.
    recompute *= 2
    sources = [
        _with_net_change(engine, owner, s, recompute) if s in candidates else s for s in observed.sources
    ]
    return read_through(replace(observed, sources=sources), plan)


def read_through(observed: Observation, plan: Callable[[], PlannedOrNot]) -> Observation:
    """``observed``, each source whose measured net change differs only in columns the planned
    query never reads (a table model's column the DT does not select) with no change: the query's
    result cannot differ between its two versions (docs/ARCHITECTURE.md, "Rewritten inputs")."""
    if not any(_changed_rows(s.net) for s in observed.sources):
        return observed
    planned = plan()
    if not isinstance(planned, PlannedQuery):
        return observed  # recomputed whatever changed
    sources = []
    for source in observed.sources:
        net = source.net
        if net is not None and _changed_rows(net):
            columns = read_columns(planned.plan, source.name)
            if columns is not None and _cancels(net.rows, columns):
                assert net.rows is not None
                net = NetChange(net.rows.slice(0, 0), net.read, unread=net.describe())
        sources.append(replace(source, net=net))
    return replace(observed, sources=sources)


def read_columns(plan: Plan, table: str) -> Optional[Set[str]]:
    """The columns of ``table`` the plan reads (lower case; empty where it only counts its rows),
    None where the plan does not scan it."""
    name = table_name(table)
    scans = [n for n in plan.root.walk() if isinstance(n, Scan) and table_name(n.table) == name]
    if not scans:
        return None
    return {c.lower() for scan in scans for c in scan.source_columns if c is not None}


def _changed_rows(net: Optional[NetChange]) -> bool:
    return net is not None and net.rows is not None and net.rows.num_rows > 0


def _cancels(rows: Optional[pa.Table], columns: Set[str]) -> bool:
    """Whether the weighted ``rows``, projected on ``columns``, sum to no row at all."""
    assert rows is not None
    names = [n for n in rows.column_names if n.lower() in columns]
    if len(names) < len(columns):
        return False  # a column the plan reads is not the change's: leave it to the delta
    if not names:
        return bool(pc.sum(rows.column(WEIGHT)).as_py() == 0)
    try:
        sums = rows.group_by(names, use_threads=False).aggregate([(WEIGHT, "sum")])
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return False  # a column Arrow cannot group: the delta query cancels it instead
    return bool(pc.all(pc.equal(sums.column(f"{WEIGHT}_sum"), 0)).as_py())


def _rewritten_bytes(interval: Optional[Interval]) -> int:
    assert interval is not None
    return interval.added_bytes + interval.removed_bytes


def _with_net_change(engine: Engine, owner: str, source: SourceState, recompute: int) -> SourceState:
    """``source`` with its net change: as an earlier refresh in this process measured it (this
    one then reads nothing), or measured now where that costs no more than ``recompute``."""
    assert source.interval is not None
    key = source.log.interval_identity(source.interval.v0, source.interval.v1)
    earlier = _measured_here.get(key) if key is not None else None
    if earlier is not None:
        return replace(source, net=replace(earlier, read=SourceReads()))
    if _rewritten_bytes(source.interval) > recompute:
        return source
    net = _measure(engine, owner, source)
    if key is not None and net.size_bytes <= KEPT_BYTES:
        _measured_here.put(key, net)
    return replace(source, net=net)


def _measure(engine: Engine, owner: str, source: SourceState) -> NetChange:
    """Read ``source``'s net change: in this process where its rewritten files are small (an
    engine job costs seconds to start and plan, in a fresh JVM most of all), else in the engine."""
    interval = source.interval
    assert interval is not None
    rows = None
    if _rewritten_bytes(interval) <= data_files.IN_PROCESS_MAX_BYTES:
        try:
            rows = changes_in_process(source.log, interval)
        except NotReadableInProcess:
            pass  # a column Arrow cannot group or would read otherwise: the engine reads it
    if rows is None:
        view = f"_dyn_net_change_{fingerprint(owner)[:12]}"
        register_changes(
            engine.spark,
            source.log,
            interval.v0,
            interval.v1,
            view,
            interval=interval,
            capabilities=engine.capabilities,
        )
        rows = engine.arrow(f"SELECT * FROM {view} LIMIT {NET_CHANGE_MAX_ROWS + 1}")
    return NetChange(rows if rows.num_rows <= NET_CHANGE_MAX_ROWS else None, interval_reads(interval))
