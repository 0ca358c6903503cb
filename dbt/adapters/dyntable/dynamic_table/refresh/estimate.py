"""Stage 1c, estimate: AUTO's weighing of an INCREMENTAL against a FULL refresh, in the bytes
each reads, sorts and writes (docs/ARCHITECTURE.md, "Deciding"). No engine job: from the planned
query, the observation (and, for a rescan within the change's range, the files of the sources'
snapshots it holds) and the engine's capabilities; the delta query is derived symbolically, as
``explain`` does, and its reads counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Tuple

from dbt.adapters.dyntable.delta_log import IntervalKind
from dbt.adapters.dyntable.delta_log.model import ValueRange
from dbt.adapters.dyntable.differentiation import differentiate, top_one
from dbt.adapters.dyntable.differentiation import window as window_rule
from dbt.adapters.dyntable.differentiation.explain import source_reads
from dbt.adapters.dyntable.differentiation.plan import Filter, Node, Plan, Scan, Window
from dbt.adapters.dyntable.differentiation.pruning import Within, restricted
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.refresh.facts import Observation, SourceState
from dbt.adapters.dyntable.dynamic_table.refresh.guard import is_guarded
from dbt.adapters.dyntable.dynamic_table.refresh.partitions import counted_window
from dbt.adapters.dyntable.dynamic_table.refresh.planned_query import PlannedQuery
from dbt.adapters.dyntable.dynamic_table.refresh.strategy import (
    InEngine,
    appends,
    counts_held_rows_here,
    in_engine,
)
from dbt.adapters.dyntable.engines.base import Capabilities
from dbt.adapters.dyntable.vocabulary import quoted_table

#: A byte a window sorts costs this many bytes of scanning: on the embedded engine, a window
#: over a million rows (partitions of a few hundred) took four times a scan of its input.
SORT_COST = 4
#: A byte of the delta's result costs this many bytes of scanning where it comes to this process
#: to be validated and staged through Arrow (docs/ARCHITECTURE.md, "Applying"), and where the
#: engine applies it alone (an append, a merge on a proven key) as much as a byte a recompute
#: writes. Calibrated on benchmarks/refresh_vs_full.py.
DELTA_BYTE_COST = {True: 1, False: 10}
#: The engine jobs of a MERGE on a proven key beyond its reads: finding the files the delta
#: touches, then rewriting them (delta-spark; ``Capabilities.job_cost_bytes`` each).
MERGE_JOBS = 2


@dataclass(frozen=True)
class Estimate:
    """AUTO's estimate of the bytes each action reads and writes, from the sources' sizes, the
    interval's changed files and how often the delta query reads each source version."""

    incremental: int
    full: int
    parts: Tuple[Tuple[str, int], ...]
    #: The share of ``full`` that sorts windows' inputs.
    full_sorts: int = 0
    #: What bounded a window's touched partitions, in words.
    bounds: Tuple[str, ...] = ()
    #: The share of ``full`` that is the engine's fixed cost of its jobs.
    full_jobs: int = 0

    def reason(self) -> str:
        if self.incremental > self.full:
            work = "reads, sorts and writes" if self.full_sorts else "reads and writes"
            jobs = f" (its engine jobs {_size(self.full_jobs)})" if self.full_jobs else ""
            return (
                f"recomputing {work} about {_size(self.full)}{jobs}; refreshing incrementally "
                f"would take about {_size(self.incremental)} ({self._largest_parts()}){self._bounds()}"
            )
        return f"sources changed: {self.weighed()}"

    def weighed(self) -> str:
        """An incremental refresh's estimate against a recompute's, in words."""
        return (
            f"refreshing incrementally takes about {_size(self.incremental)} ({self._largest_parts()}) "
            f"against {_size(self.full)} to recompute{self._bounds()}"
        )

    def _largest_parts(self) -> str:
        biggest = sorted(self.parts, key=lambda part: -part[1])[:3]
        return ", ".join(f"{what} {_size(size)}" for what, size in biggest)

    def _bounds(self) -> str:
        return "".join(f"; {bound}" for bound in self.bounds)


def estimate(
    planned: PlannedQuery,
    observed: Observation,
    dt: DynamicTable,
    capabilities: Capabilities,
    checked_fold: bool = True,
) -> Estimate:
    """What an INCREMENTAL and a FULL refresh would read and write (docs/ARCHITECTURE.md,
    "Deciding"). The delta query is derived symbolically, as ``explain`` does, with the sources'
    real kinds of change, and its reads counted: every read of a source version is a scan of it,
    of its changes a read of the changed files, of the DT a scan of the DT; a delta that may
    delete rewrites the DT's files; the delta's own rows cost more where they come to this
    process, and reading what the DT holds of them there is one more scan of the DT, plus the
    engine's fixed cost of staging them. A recompute scans each source once per read of it in
    the query, then reads the DT and groups it with its result to write only what differs.
    Without ``checked_fold``, the delta rescans the groups a checked fold would fold."""
    sources = {s.name: s for s in observed.sources}
    stored = dt.relation
    symbolic = _SymbolicChanges(sources)
    delta = differentiate(planned.plan, symbolic, stored, checked_fold and dt.config.recomputes_when_unsure)
    key = planned.key
    engine_alone = in_engine(
        dt, is_guarded(dt), delta, key.columns, key.declared_by, capabilities, observed.dt_size_bytes
    )
    # An accumulation's partials read what the delta reads but the DT; the MERGE reads the DT.
    applied = (
        delta.accumulation.sql if engine_alone is InEngine.ACCUMULATE and delta.accumulation else delta.sql
    )
    parts: Dict[str, int] = {}
    for (name, version), count in source_reads(applied).items():
        source = sources[name]
        if version == "changes":
            parts[f"{name} changes"] = count * _change_read_bytes(source, capabilities)
        else:
            parts[f"{name} at {version}"] = count * source.size_bytes
    _bounded_reads(parts, applied, symbolic, sources)
    stored_reads = applied.count(stored) + (0 if delta.insert_only else 1)
    if engine_alone is None and not appends(delta.insert_only, key.columns, key.declared_by):
        stored_reads += _staging(parts, observed, capabilities)
    if engine_alone is InEngine.MERGE and capabilities.job_cost_bytes:
        parts["the engine's MERGE"] = MERGE_JOBS * capabilities.job_cost_bytes
    if stored_reads:
        parts["this table"] = stored_reads * observed.dt_size_bytes
    # The result's share of the DT: as large as the changed share of each changed source.
    changed_share = sum(_changed_share(s) for s in observed.sources)
    delta_cost = DELTA_BYTE_COST[engine_alone is not None]
    parts["the delta"] = int(delta_cost * min(changed_share, 1.0) * observed.dt_size_bytes)
    scans = sum(s.size_bytes * _scans(planned.plan.root, s.name) for s in observed.sources)
    sorts, bounds = _windows(planned.plan, delta.applied, observed, parts, capabilities)
    # A recompute writes only the rows that differ from the DT's (``rebuild.py``): it reads the DT
    # and groups its rows with the query's by every column, as a rewritten input's net change is.
    difference = int(2 * capabilities.grouping_cost * observed.dt_size_bytes)
    # That is an engine job (``apply.difference``), then written as a staged delta is.
    jobs = capabilities.job_cost_bytes + _engine_write(capabilities)
    full = scans + sorts + difference + jobs
    return Estimate(sum(parts.values()), full, tuple(parts.items()), sorts, tuple(bounds), jobs)


def _windows(
    plan: Plan,
    applied: Mapping[int, str],
    observed: Observation,
    parts: Dict[str, int],
    capabilities: Capabilities,
) -> Tuple[int, List[str]]:
    """The bytes a recompute sorts for the plan's windows, and what bounded their touched
    partitions, in words; the bytes the delta sorts again put in ``parts``."""
    sorts, bounds = 0, []
    for window in (n for n in plan.root.walk() if isinstance(n, Window)):
        sorted_bytes = SORT_COST * sum(s.size_bytes * _scans(window, s.name) for s in observed.sources)
        sorts += sorted_bytes
        resorted, bound = _touched_sort(window, plan, applied, observed, sorted_bytes, capabilities)
        bounds += [bound] if bound else []
        if resorted:
            touched = "sorting touched partitions"
            parts[touched] = parts.get(touched, 0) + resorted
    return sorts, bounds


def _engine_write(capabilities: Capabilities) -> int:
    """The fixed cost of writing rows staged in this process: none where this process writes
    them (``Capabilities.merge_in_process``), else the engine's MERGE."""
    return 0 if capabilities.merge_in_process else MERGE_JOBS * capabilities.job_cost_bytes


def _bounded_reads(
    parts: Dict[str, int], applied: str, symbolic: "_SymbolicChanges", sources: Mapping[str, SourceState]
) -> None:
    """Charge the reads of a source version within a bound (``pruning.py``) the bytes of the
    files that may hold rows within it, instead of the whole version's."""
    for text, (name, version, read) in symbolic.bounded.items():
        count = applied.count(text)
        if not count:
            continue
        whole = f"{name} at {version}"
        parts[whole] = parts.get(whole, 0) - count * sources[name].size_bytes
        if parts[whole] <= 0:
            del parts[whole]
        within = f"{name} at {version} within the change's range"
        parts[within] = parts.get(within, 0) + count * read


def _staging(parts: Dict[str, int], observed: Observation, capabilities: Capabilities) -> int:
    """The reads of the DT a delta staged in this process adds, its staging jobs' fixed cost put
    in ``parts``. The delta is joined to the DT to count the copies it holds of each row
    (``apply.prepare``): one more read of the DT before the MERGE's own and a second job, unless
    this process counts them from a small DT's files (``held_rows``)."""
    counted_here = counts_held_rows_here(capabilities, observed.dt_size_bytes)
    if capabilities.job_cost_bytes:
        parts["staging the delta"] = (1 if counted_here else 2) * capabilities.job_cost_bytes
    if _engine_write(capabilities):
        parts["the engine's MERGE"] = _engine_write(capabilities)
    return 0 if counted_here else 1


def _change_read_bytes(source: SourceState, capabilities: Capabilities) -> int:
    """What one read of ``source``'s changes costs: its measured net change, held in this
    process; else its changed files, grouped by every column where files were rewritten (both
    versions are read and grouped to cancel the unchanged rows)."""
    if source.net is not None and source.net.rows is not None:
        return source.net.size_bytes
    interval = source.interval
    assert interval is not None
    weight = 1 if interval.kind is IntervalKind.ADDED_ONLY else capabilities.grouping_cost
    return int(weight * (interval.added_bytes + interval.removed_bytes))


def _changed_share(source: SourceState) -> float:
    """The share of ``source``'s rows its change holds: by its measured net change, else by its
    changed files' bytes."""
    if source.net is not None and source.net.row_count is not None and source.row_count:
        return source.net.row_count / source.row_count
    if source.interval is None or not source.size_bytes:
        return 0.0
    return (source.interval.added_bytes + source.interval.removed_bytes) / source.size_bytes


def _touched_sort(
    window: Window,
    plan: Plan,
    applied: Mapping[int, str],
    observed: Observation,
    sorted_bytes: int,
    capabilities: Capabilities,
) -> Tuple[int, str]:
    """The bytes a window's delta sorts again (a recompute sorts ``sorted_bytes``), the touched
    partitions' (the rules recompute those only), and what bounded them, in words. A change of n
    rows touches at most n partitions: a DT that stores each partition's first row (``top_one``)
    holds one row per partition, and where its input only gained rows the delta sorts those
    partitions' stored rows and the inserted ones, never the input; elsewhere the partitions
    counted in the DT (``partitions.measured``) give each one's share, and both versions of the
    touched ones are sorted. Where neither is known the delta is taken to sort all of the input,
    as a recompute does, which leaves the choice to the other costs."""
    read = window.sources()
    changing = [s for s in observed.sources if s.name in read and not s.reads_no_change]
    if not changing:
        return 0, ""
    changed = [s.changed_rows for s in changing]
    rows = None if any(n is None for n in changed) else sum(n for n in changed if n is not None)
    first_rows = {
        applied.get(id(n))
        for n in plan.root.walk()
        if isinstance(n, Filter) and _first_row_window(n) is window
    }
    stored_share = min(1.0, rows / observed.dt_rows) if rows is not None and observed.dt_rows else 1.0
    if top_one.INSERTS_RULE in first_rows:
        inserted = sum(_change_read_bytes(s, capabilities) for s in changing)
        return int(SORT_COST * (stored_share * observed.dt_size_bytes + inserted)), ""
    if rows is None:
        return sorted_bytes, ""
    if top_one.RULE in first_rows:
        return int(stored_share * sorted_bytes), ""
    partitions = observed.window_partitions
    counted = counted_window(plan)
    if not partitions or counted is None or counted[0] is not window:
        return sorted_bytes, ""
    sides = 1 if applied.get(id(window)) == window_rule.STORED_RULE else 2
    bound = min(rows, partitions)
    counted_in = f"at most {bound:,} of the {partitions:,} partitions counted in this table"
    share = min(1.0, sides * bound / partitions)
    return int(share * sorted_bytes), f"a change of {rows:,} row(s) touches {counted_in}"


def _first_row_window(node: Filter) -> Optional[Window]:
    matched = node.first_row_window()
    return matched[0] if matched else None


class _SymbolicChanges:
    """A ``SourceResolver`` naming each source version symbolically (as ``explain`` does), that
    knows which sources did not change and which only gained rows, and what a read of a version
    within a bound reads (``bounded``: per relation handed out, its source, version and bytes)."""

    def __init__(self, sources: Mapping[str, SourceState]) -> None:
        self.sources = sources
        self.bounded: Dict[str, Tuple[str, str, int]] = {}

    def before(self, table: str, bound: Optional[Within] = None) -> str:
        return self._version(table, "v0", bound)

    def after(self, table: str, bound: Optional[Within] = None) -> str:
        return self._version(table, "v1", bound)

    def _version(self, table: str, version: str, bound: Optional[Within]) -> str:
        source = self.sources[table]
        at = source.start if version == "v0" else source.end
        files = source.log.files_at(at) if bound is not None and at is not None else ()
        pruning = None if bound is None else bound.pruning(files)
        text = restricted(quoted_table(f"{table}@{version}"), pruning)
        if pruning is not None:
            self.bounded[text] = (
                table,
                version,
                sum(f.size_bytes for f in pruning.read(files)),
            )
        return text

    def value_range(self, table: str, column: str) -> Optional[ValueRange]:
        interval = self.sources[table].interval
        return None if interval is None else interval.value_range(column)

    def size_bytes(self, table: str) -> Optional[int]:
        return self.sources[table].size_bytes

    def changes(self, table: str) -> str:
        return quoted_table(f"{table}@changes")

    def is_unchanged(self, table: str) -> bool:
        return self.sources[table].reads_no_change

    def is_insert_only(self, table: str) -> bool:
        source = self.sources[table]
        if source.net is not None and source.net.rows is not None:
            return source.net.inserts_only
        interval = source.interval
        return interval is None or interval.kind in (IntervalKind.EMPTY, IntervalKind.ADDED_ONLY)


def _scans(node: Node, table: str) -> int:
    return sum(1 for n in node.walk() if isinstance(n, Scan) and n.table == table)


def _size(size: int) -> str:
    amount = float(size)
    for unit in ("B", "kB", "MB"):
        if amount < 1000:
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1000
    return f"{amount:.1f} GB"
