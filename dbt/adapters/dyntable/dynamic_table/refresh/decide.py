"""Stage 1, decide: what a refresh does and why (docs/ARCHITECTURE.md, "Deciding").

:func:`observe` is this stage's only I/O: it reads what the Delta logs say about the DT's sources
as of the data timestamp (metadata only, never an engine job). Everything else here is pure, and
unit-tested without an engine:

* :func:`maintained_definition`: which definition this refresh maintains, by the
  ``on_configuration_change`` policy, and the reasons to rebuild known before reading sources;
* :func:`decide`: NO_DATA, REINITIALIZE, FULL or INCREMENTAL, with the reason, as a changeset in
  the way relation configs decide ``requires_full_refresh``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from dbt.adapters.dyntable.delta_log import DeltaLog, Interval, IntervalKind
from dbt.adapters.dyntable.differentiation.views import base_tables
from dbt.adapters.dyntable.dynamic_table.config import definition_hash
from dbt.adapters.dyntable.dynamic_table.lifecycle import Action, RefreshRequest, State, Trigger
from dbt.adapters.dyntable.dynamic_table.metadata import Frontier, MetadataStore
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.pinning import boundary_tables, read_views
from dbt.adapters.dyntable.dynamic_table.refresh.plan import NotPlanned, PlannedOrNot, PlannedQuery
from dbt.adapters.dyntable.engines.base import Engine

#: AUTO refreshes FULL when the changed bytes exceed this share of the sources' bytes: a delta
#: query then reads about as much as a recomputation and adds a MERGE on top.
AUTO_FULL_CHANGE_SHARE = 0.3
#: How much more a byte of rewritten files costs an incremental refresh than an appended one: both
#: versions of each rewritten file are read, their unchanged rows cancelled by a group-by over
#: every column, and the resulting deletes matched against the DT (benchmarks/results show mixed
#: changes costing several times their share of the bytes).
MIXED_CHANGE_COST = 4


class RefreshError(RuntimeError):
    """A refresh failed; the DT keeps its last good version. The message names the DT and the fix."""


@dataclass(frozen=True)
class Definition:
    """The definition a refresh maintains, and what is known before its sources are read."""

    sql: str
    hash: str
    rebuild_reason: Optional[str] = None
    warnings: Tuple[str, ...] = ()


@dataclass(frozen=True)
class SourceState:
    """A source's version at the frontier (``start``) and as of the refresh's T (``end``), the
    change between them (``interval``, read from the log only when they differ) and its size at
    ``end`` in bytes."""

    name: str
    log: DeltaLog
    start: Optional[int]
    end: int
    is_dynamic_table: bool
    interval: Optional[Interval] = None
    size_bytes: int = 0


@dataclass(frozen=True)
class Observation:
    """What the logs say at T: every source's state, and T itself, moved back to the data
    timestamp of an upstream DT that has not reached it (delayed view semantics)."""

    sources: Sequence[SourceState]
    data_timestamp: datetime
    #: Definitions of the views the query reads, transitively (``schema.view``).
    views: Mapping[str, str] = field(default_factory=dict)

    @property
    def versions(self) -> Dict[str, int]:
        return {s.name: s.end for s in self.sources}


@dataclass(frozen=True)
class Decision:
    """The action a refresh takes and why; ``action`` None means the DT is only created empty."""

    action: Optional[Action]
    reason: str
    state: State = State.SUCCEEDED
    planned: Optional[PlannedQuery] = field(default=None, compare=False)

    @property
    def rebuilds(self) -> bool:
        return self.action in (Action.FULL, Action.REINITIALIZE)


def creates_empty(dt: DynamicTable, dt_exists: bool, request: RefreshRequest) -> bool:
    """``initialize: on_schedule`` under `dbt run`: create the DT empty; the runner fills it."""
    return not dt_exists and dt.config.initialize == "on_schedule" and request.trigger is Trigger.DBT_RUN


def maintained_definition(
    dt: DynamicTable, frontier: Optional[Frontier], dt_exists: bool, request: RefreshRequest
) -> Definition:
    """The definition this refresh maintains, and the reason to rebuild that needs no source:
    the model's own definition, or, under ``on_configuration_change: continue``, the previous
    one; ``fail`` refuses a changed definition."""
    digest = definition_hash(dt.sql, dt.config)
    if not dt_exists:
        return Definition(dt.sql, digest, "first build")
    if request.full_refresh:
        return Definition(dt.sql, digest, "--full-refresh")
    if frontier is None:
        scheduled = dt.config.initialize == "on_schedule"
        why = (
            "first refresh (initialize: on_schedule)" if scheduled else "no frontier recorded for this table"
        )
        return Definition(dt.sql, digest, why)
    if frontier.definition_hash != digest:
        policy = dt.config.on_configuration_change
        if policy == "fail":
            raise RefreshError(
                f"Dynamic table {dt.name}: its definition changed and on_configuration_change "
                "is 'fail'. Run with --full-refresh, or set on_configuration_change to 'apply'."
            )
        if policy == "continue":
            return Definition(
                frontier.definition,
                frontier.definition_hash,
                warnings=(
                    f"Dynamic table {dt.name}: its definition changed but on_configuration_change "
                    "is 'continue': keeping the previous definition until a --full-refresh.",
                ),
            )
        return Definition(dt.sql, digest, "definition changed")
    if frontier.refresh_mode != dt.config.refresh_mode:
        return Definition(
            dt.sql, digest, f"refresh mode changed from {frontier.refresh_mode} to {dt.config.refresh_mode}"
        )
    return Definition(dt.sql, digest)


def decide(
    dt: DynamicTable,
    definition: Definition,
    frontier: Optional[Frontier],
    observed: Observation,
    plan: Callable[[], PlannedOrNot],
) -> Decision:
    """The refresh's action. ``plan`` plans the query; it is called only when the action depends
    on it (never for NO_DATA), so unchanged sources cost no planning."""
    if definition.rebuild_reason is None:
        assert frontier is not None
        if observed.data_timestamp < frontier.data_timestamp:
            return Decision(Action.NO_DATA, "an upstream dynamic table is behind this one", State.SKIPPED)
        if observed.versions == frontier.source_versions:
            return Decision(Action.NO_DATA, "no source changed")
    planned = plan()
    if dt.config.refresh_mode == "incremental" and isinstance(planned, NotPlanned):
        raise RefreshError(
            f"Dynamic table {dt.name} has refresh_mode 'incremental' but its query cannot be "
            f"refreshed incrementally: {planned.cause}. Rewrite that part of the query, or "
            "set refresh_mode to 'auto' or 'full'."
        )
    if definition.rebuild_reason is not None:
        return Decision(Action.REINITIALIZE, definition.rebuild_reason)
    blocked = [
        f"{s.name}: {s.interval.undifferentiable_reason}"
        for s in observed.sources
        if s.interval is not None and s.interval.undifferentiable_reason
    ]
    if any(s.start is None for s in observed.sources):
        blocked.append("a source is new to this table")
    if blocked:
        return Decision(Action.REINITIALIZE, "; ".join(blocked))
    if isinstance(planned, NotPlanned):
        return Decision(Action.FULL, planned.reason)
    if dt.config.refresh_mode == "auto":
        too_large = _change_too_large(observed.sources)
        if too_large is not None:
            return Decision(Action.FULL, too_large)
    return Decision(Action.INCREMENTAL, "sources changed", planned=planned)


def _change_too_large(sources: Sequence[SourceState]) -> Optional[str]:
    """AUTO's cost estimate: why recomputing is cheaper, or None."""
    intervals: List[Interval] = [s.interval for s in sources if s.interval is not None]
    changed = sum(
        (i.added_bytes + i.removed_bytes) * (1 if i.kind is IntervalKind.ADDED_ONLY else MIXED_CHANGE_COST)
        for i in intervals
    )
    total = sum(s.size_bytes for s in sources) or 1
    if changed <= AUTO_FULL_CHANGE_SHARE * total:
        return None
    return (
        f"changes weigh {changed / total:.0%} of the sources' bytes (over "
        f"{AUTO_FULL_CHANGE_SHARE:.0%}): recomputing is cheaper"
    )


def observe(
    engine: Engine,
    metadata: MetadataStore,
    dt: DynamicTable,
    definition: Definition,
    frontier: Optional[Frontier],
    data_timestamp: datetime,
) -> Observation:
    """Each source of ``definition`` as of T, from the Delta logs. Upstream DTs are read at the
    version their refresh at T produced; if one has not reached T, T moves back to its data
    timestamp (delayed view semantics). Across a refresh boundary there is no common T: a DT is
    read at the version its latest refresh produced, a table at its latest version, and neither
    holds T back. Intervals are read only for a refresh that will differentiate."""
    views = read_views(engine, definition.sql, dt.schema)
    names = sorted(base_tables(definition.sql, views, dt.schema))
    across = boundary_tables(definition.sql, views, dt.schema)
    frontiers = metadata.frontiers()
    upstream = {n: frontiers[n] for n in names if n in frontiers}
    effective = min([data_timestamp] + [f.data_timestamp for n, f in upstream.items() if n not in across])
    resuming = frontier if definition.rebuild_reason is None else None
    states = []
    for name in names:
        log = engine.delta_log(name)
        if log is None:
            raise RefreshError(
                f"Source {name} does not exist or is not a Delta table. Build it first "
                "(dbt run), or fix the reference in the model."
            )
        if name in upstream:
            version = upstream[name].dt_version
        elif name in across:
            version = log.latest_version()
        else:
            version = _version_at(log, name, effective, metadata)
        start = resuming.source_versions.get(name) if resuming else None
        interval = log.interval(start, version) if start is not None and start != version else None
        states.append(SourceState(name, log, start, version, name in upstream, interval))
    if dt.config.refresh_mode == "auto" and any(s.interval is not None for s in states):
        states = [replace(s, size_bytes=s.log.size_bytes(s.end)) for s in states]
    return Observation(states, effective, views)


def _version_at(log: DeltaLog, name: str, moment: datetime, metadata: MetadataStore) -> int:
    found = log.version_at(int(moment.timestamp() * 1000))
    if found is None and name in metadata.graph():
        raise RefreshError(
            f"Source {name} is a dynamic table that is not initialized yet (initialize: "
            "on_schedule). Let the runner's first tick fill it, run `dbt run -s` on it "
            "first, or set initialize: on_schedule on this model too."
        )
    if found is None:
        raise RefreshError(f"Source {name} did not exist at the data timestamp {moment.isoformat()}.")
    return found
