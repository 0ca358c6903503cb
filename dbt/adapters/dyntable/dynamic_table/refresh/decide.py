"""Stage 1, decide: what a refresh does and why (docs/ARCHITECTURE.md, "Deciding").

:func:`observe` is this stage's only I/O: it reads what the Delta logs say about the DT's sources
as of the data timestamp (metadata only, never an engine job). Everything else here is pure, and
unit-tested without an engine:

* :func:`maintained_definition`: which definition this refresh maintains, by the
  ``on_configuration_change`` policy, and the reasons to rebuild known before reading sources;
* :func:`decide`: NO_DATA, REINITIALIZE, FULL or INCREMENTAL, with the reason; under
  ``refresh_mode: auto``, by the costs ``estimate.py`` weighs.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime, timezone
from typing import Callable, Mapping, Optional, Set

from dbt.adapters.dyntable.delta_log import DeltaLog
from dbt.adapters.dyntable.differentiation.views import base_tables
from dbt.adapters.dyntable.dynamic_table.changeset import (
    QueryDefinition,
    RefreshMode,
    definition_changes,
    definition_hash,
)
from dbt.adapters.dyntable.dynamic_table.clock import query_clock
from dbt.adapters.dyntable.dynamic_table.lifecycle import Action, RefreshRequest, SourceRead, State, Trigger
from dbt.adapters.dyntable.dynamic_table.metadata import Frontier, MetadataStore
from dbt.adapters.dyntable.dynamic_table.model import PLAIN_NAME, DynamicTable, RefreshError
from dbt.adapters.dyntable.dynamic_table.pinning import boundary_tables, read_views
from dbt.adapters.dyntable.dynamic_table.refresh.estimate import estimate
from dbt.adapters.dyntable.dynamic_table.refresh.facts import Decision, Definition, Observation, SourceState
from dbt.adapters.dyntable.dynamic_table.refresh.planned_query import NotPlanned, PlannedOrNot
from dbt.adapters.dyntable.engines.base import Capabilities, Engine

#: The rebuild reason of `--full-refresh`: the user asked for every row to be computed again.
FULL_REFRESH = "--full-refresh"
#: A source commit stamped further ahead of the refreshing machine's clock than this is reported:
#: it, and every later commit of its table, wait for the data timestamp to pass its stamp
#: (docs/ARCHITECTURE.md, "Reading sources", "Commit timestamps").
CLOCK_SKEW_TOLERANCE_MS = 60_000
#: What a refresh's reason and warnings say of such a commit (``dyntable status`` finds it).
CLOCK_SKEW = "ahead of this machine's clock"


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
        why = "this table: it no longer exists (dropped outside dbt-dyntable)" if frontier else "first build"
        return Definition(dt.sql, digest, why)
    if request.full_refresh:
        return Definition(dt.sql, digest, FULL_REFRESH)
    if frontier is None:
        scheduled = dt.config.initialize == "on_schedule"
        why = (
            "first refresh (initialize: on_schedule)" if scheduled else "no frontier recorded for this table"
        )
        return Definition(dt.sql, digest, why)
    changes = definition_changes(dt.sql, dt.config, frontier)
    if changes.get(QueryDefinition.setting) is not None:
        policy = dt.config.on_configuration_change
        if policy == "fail":
            raise RefreshError(
                "its definition changed and on_configuration_change "
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
        # Rebuilt for the new definition, whatever else changed with it.
        changes = changes.without(RefreshMode.setting)
    return Definition(dt.sql, digest, changes.rebuild_reason())


def held_data_timestamp(frontier: Optional[Frontier], reached: Optional[datetime]) -> Optional[datetime]:
    """The latest data timestamp the DT holds: its frontier's, or a later one a refresh reached
    whose frontier waits for the end of its process's batch (its DT's lock records it:
    ``locking.RefreshLock``). No refresh may leave the DT at an earlier one, whoever runs it."""
    held = [t for t in (frontier.data_timestamp if frontier else None, reached) if t is not None]
    return max(held) if held else None


def raised_for(held: datetime, requested: datetime) -> str:
    """What a rebuild asked for at ``requested`` says when it is done at ``held`` instead."""
    return (
        f"rebuilt as of its data timestamp {held:%Y-%m-%d %H:%M:%S} UTC, which another refresh "
        f"reached, rather than {requested:%Y-%m-%d %H:%M:%S} UTC: a data timestamp never goes back"
    )


def decide(
    dt: DynamicTable,
    definition: Definition,
    frontier: Optional[Frontier],
    observed: Observation,
    plan: Callable[[], PlannedOrNot],
    capabilities: Capabilities,
    held: Optional[datetime] = None,
) -> Decision:
    """The refresh's action on an engine with ``capabilities``. ``plan`` plans the query; it is
    called only when the action depends on it (never for NO_DATA), so unchanged sources cost no
    planning. ``held`` is the data timestamp the DT holds (:func:`held_data_timestamp`; its
    frontier's when None): a refresh at an earlier one, a rebuild included, is SKIPPED."""
    held = held or (frontier.data_timestamp if frontier else None)
    if held is not None and observed.data_timestamp < held:
        return Decision(Action.NO_DATA, _ahead(observed, held), State.SKIPPED)
    if definition.rebuild_reason is None:
        assert frontier is not None
        rebuild = _history_lost(observed, frontier)
        if rebuild is None:
            if all(s.unchanged for s in observed.sources) and set(observed.versions) == set(frontier.sources):
                if observed.clock is None or observed.data_timestamp == frontier.data_timestamp:
                    waiting = "".join(f"; {why}" for why in observed.waiting)
                    return Decision(Action.NO_DATA, _no_change(observed) + _held_back(observed) + waiting)
                return Decision(
                    Action.FULL,
                    f"no source changed, but the query reads the clock ({observed.clock}): "
                    "recomputed as of the new data timestamp",
                )
        definition = replace(definition, rebuild_reason=rebuild)
    planned = plan()
    if dt.config.refresh_mode == "incremental" and isinstance(planned, NotPlanned):
        raise RefreshError(
            "it has refresh_mode 'incremental' but its query cannot be "
            f"refreshed incrementally: {planned.cause}. Rewrite that part of the query, or "
            "set refresh_mode to 'auto' or 'full'."
        )
    if definition.rebuild_reason is not None:
        return Decision(Action.REINITIALIZE, definition.rebuild_reason)
    if isinstance(planned, NotPlanned):
        return Decision(Action.FULL, planned.reason)
    if dt.config.refresh_mode == "auto":
        cost = estimate(planned, observed, dt, capabilities)
        action = Action.FULL if cost.incremental > cost.full else Action.INCREMENTAL
        reason = _rewritten(observed) + cost.reason()
        return Decision(action, reason, planned=planned if action is Action.INCREMENTAL else None)
    return Decision(Action.INCREMENTAL, _rewritten(observed) + "sources changed", planned=planned)


def _rewritten(observed: Observation) -> str:
    """What the measured rewrites of sources changed, as the start of a reason."""
    measured = [
        f"{s.name} was rewritten (version {s.start} to {s.end}): {s.net.describe()}"
        for s in observed.sources
        if s.net is not None and (s.net.unread or not s.net.empty)
    ]
    return "".join(f"{text}; " for text in measured)


def _no_change(observed: Observation) -> str:
    """Why no row of any source changed: no new version, or versions that rewrote the same rows
    (docs/ARCHITECTURE.md, "Rewritten inputs")."""
    rewritten = [
        f"{s.name} was rewritten (version {s.start} to {s.end})"
        + (f": {s.net.describe()}" if s.net is not None and s.net.unread else " with the same rows")
        for s in observed.sources
        if s.start != s.end
    ]
    return f"no source changed its rows: {'; '.join(rewritten)}" if rewritten else "no source changed"


def _held_back(observed: Observation) -> str:
    """Why T is older than the one requested, as the end of a NO_DATA reason."""
    if not observed.held_by:
        return ""
    return (
        f" as of {observed.data_timestamp:%Y-%m-%d %H:%M:%S} UTC, the data timestamp of upstream "
        f"dynamic table {', '.join(observed.held_by)}, which was not refreshed past it"
    )


def _ahead(observed: Observation, held: datetime) -> str:
    """Why a DT already holds a later data timestamp than this refresh's."""
    if observed.held_by:
        return (
            f"upstream dynamic table {', '.join(observed.held_by)} is behind this one (at "
            f"{observed.data_timestamp:%Y-%m-%d %H:%M:%S} UTC)"
        )
    return (
        f"already refreshed to a later data timestamp ({held:%Y-%m-%d %H:%M:%S} UTC) "
        "by a refresh that started after this one"
    )


def _history_lost(observed: Observation, frontier: Frontier) -> Optional[str]:
    """Why the DT cannot continue from its frontier: its own table or a source is no longer the
    history it consumed, a source's change cannot be differentiated, a source is new or no longer
    read, or a view the query reads was redefined."""
    reasons = [f"this table: {observed.dt_changed}"] if observed.dt_changed else []
    if frontier.views is not None:  # None: recorded before views were
        now = observed.view_fingerprints
        reasons += [
            f"view {view}: "
            + (
                "redefined"
                if view in now and view in frontier.views
                else "now read"
                if view in now
                else "no longer read"
            )
            for view in sorted(set(now) | set(frontier.views))
            if now.get(view) != frontier.views.get(view)
        ]
    read = {s.name for s in observed.sources}
    reasons += [f"{name}: no longer read" for name in sorted(set(frontier.sources) - read)]
    reasons += [f"{s.name}: {s.lost}" for s in observed.sources if s.lost]
    reasons += [
        f"{s.name}: {s.interval.undifferentiable_reason}"
        for s in observed.sources
        if s.interval is not None and s.interval.undifferentiable_reason
    ]
    reasons += [f"{s.name}: new to this table" for s in observed.sources if s.start is None and not s.lost]
    return "; ".join(reasons) or None


class SourceNotReady(RefreshError):
    """A source did not exist at the data timestamp: the refresh waits (SKIPPED), it does not fail."""


def observe(
    engine: Engine,
    metadata: MetadataStore,
    dt: DynamicTable,
    definition: Definition,
    frontier: Optional[Frontier],
    request: RefreshRequest,
) -> Observation:
    """Each source of ``definition`` as of T, from the Delta logs (docs/ARCHITECTURE.md,
    "Reading sources"): a base table at its latest version at or before T; an upstream DT at the
    version its refresh at T produced (if one has not reached T, T moves back to its data
    timestamp); a table this invocation built, or one read across a refresh boundary, at its
    latest version. Intervals are read only for a refresh that will differentiate."""
    views = read_views(engine, definition.sql, dt.schema)
    names = sorted(base_tables(definition.sql, views, dt.schema))
    across = boundary_tables(definition.sql, views, dt.schema)
    frontiers = metadata.frontiers()
    upstream = {n: frontiers[n] for n in names if n in frontiers}
    effective = min(
        [request.data_timestamp] + [f.data_timestamp for n, f in upstream.items() if n not in across]
    )
    resuming = frontier if definition.rebuild_reason is None else None
    states = []
    for name in names:
        consumed = resuming.sources.get(name) if resuming else None
        log = _source_log(engine, name, consumed.version if consumed else None)
        read = _read_of(name, upstream, across, request)
        version = _version_read(log, name, read, upstream, effective, metadata)
        state = _source_state(log, name, version, read, resuming)
        if read is SourceRead.AS_OF:
            state = replace(state, waiting=_waiting(log, name, version))
        states.append(state)
    produced = resuming.dt_version if resuming is not None and resuming.dt_version >= 0 else None
    dt_log = engine.delta_log(dt.name, since=produced)
    dt_size, dt_rows = 0, None
    if dt.config.refresh_mode == "auto" and any(s.interval is not None for s in states):
        states = [
            replace(s, size_bytes=s.log.size_bytes(s.end), row_count=s.log.num_records(s.end)) for s in states
        ]
        if dt_log is not None:
            dt_size = dt_log.size_bytes(dt_log.latest_version())
            dt_rows = dt_log.num_records(dt_log.latest_version())
    clock = query_clock(definition.sql, views, dt.schema)
    held_by = tuple(
        n
        for n, f in sorted(upstream.items())
        if n not in across and f.data_timestamp == effective < request.data_timestamp
    )
    return Observation(
        states, effective, views, _dt_changed(dt_log, resuming), dt_size, dt_rows, clock, held_by, dt_log
    )


def _source_log(engine: Engine, name: str, since: Optional[int]) -> DeltaLog:
    """The Delta log of source ``name`` (its listing held for the refresh), or the error saying
    why it has none; ``since``: the version the refresh consumed last."""
    log = engine.delta_log(name, hold_listing=True, since=since)
    if log is None and not engine.capabilities.escaped_table_paths and not _plain(name):
        raise RefreshError(
            f"Source {name} cannot be read incrementally by the {engine.name} engine: it stores "
            "a table whose name has spaces, punctuation or non-ASCII letters where its Delta log "
            'cannot be found again (docs/ARCHITECTURE.md, "Engines"). Rename the table to '
            "letters, digits and underscores, or run on Spark (method: session)."
        )
    if log is not None:
        return log
    schema, table = name.split(".", 1)
    if engine.catalog_entry(schema, table):
        raise RefreshError(
            f"Source {name} is not a Delta table, and a dynamic table reads Delta tables "
            "only. Build it as Delta: set `file_format: delta` for it (`+file_format: delta` "
            "for models, seeds and snapshots in dbt_project.yml) and build it again (dbt run, "
            "dbt seed)."
        )
    raise RefreshError(
        f"Source {name} does not exist. Build it first (dbt run, dbt seed), or fix the "
        "reference in the model."
    )


def _plain(name: str) -> bool:
    return all(PLAIN_NAME.match(part) for part in name.split(".", 1))


def _read_of(
    name: str, upstream: Mapping[str, Frontier], across: Set[str], request: RefreshRequest
) -> SourceRead:
    if name in across:
        return SourceRead.BOUNDARY
    if name in upstream:
        return SourceRead.UPSTREAM
    if name in request.built:
        return SourceRead.INVOCATION
    return SourceRead.AS_OF


def _version_read(
    log: DeltaLog,
    name: str,
    read: SourceRead,
    upstream: Mapping[str, Frontier],
    moment: datetime,
    metadata: MetadataStore,
) -> int:
    if name in upstream and read in (SourceRead.UPSTREAM, SourceRead.BOUNDARY):
        produced = upstream[name]
        if produced.dt_version < 0:
            # Only the intent of its first refresh is recorded (Recorder.intend on a DT with no
            # frontier): no version holds its rows yet. Never read "version -1"; wait for it
            # (docs/ARCHITECTURE.md, "Exactly once").
            raise SourceNotReady(
                f"Source {name} is a dynamic table whose first refresh has not committed yet "
                "(its frontier holds only that refresh's intent); this table waits for it."
            )
        return produced.dt_version  # a DT: the version its latest refresh produced
    if read is not SourceRead.AS_OF:
        return log.latest_version()
    found = log.version_at(int(moment.timestamp() * 1000))
    if found is None and name in metadata.graph():
        raise SourceNotReady(
            f"Source {name} is a dynamic table that is not initialized yet (initialize: "
            "on_schedule); this table waits for its first refresh."
        )
    if found is None:
        created = datetime.fromtimestamp(log.commit_timestamp(0) / 1000, tz=moment.tzinfo)
        raise SourceNotReady(
            f"Source {name} did not exist at the data timestamp {moment.isoformat()} (it was "
            f"created at {created.isoformat()}); this table waits for a later data timestamp."
        )
    return found


def _source_state(
    log: DeltaLog, name: str, version: int, read: SourceRead, resuming: Optional[Frontier]
) -> SourceState:
    commit = log.commit_id(version)
    consumed = resuming.sources.get(name) if resuming else None
    if consumed is None:
        return SourceState(name, log, None, version, commit, read)
    lost = log.lost_commit(consumed.version, consumed.commit)
    if lost is None and consumed.version == version and consumed.commit != commit:
        lost = f"its version {version} is not the commit consumed"
    interval = None
    if lost is None and consumed.version != version:
        interval = log.interval(consumed.version, version)
    return SourceState(name, log, consumed.version, version, commit, read, lost, interval)


def _waiting(log: DeltaLog, name: str, version: int) -> Optional[str]:
    """Why ``name``'s commits after ``version`` are not read yet, when the next one is stamped
    more than :data:`CLOCK_SKEW_TOLERANCE_MS` ahead of this machine's clock: its writer's clock
    runs ahead. It is read once the data timestamp passes its stamp, and the later commits with
    it (a table's versions are read in order); meanwhile every refresh says so."""
    latest = log.latest_version()
    if version >= latest:
        return None
    stamp = log.commit_timestamp(version + 1)
    ahead = stamp - int(time.time() * 1000)
    if ahead <= CLOCK_SKEW_TOLERANCE_MS:
        return None
    at = datetime.fromtimestamp(stamp / 1000, tz=timezone.utc)
    return (
        f"{name}: {latest - version} newer commit(s) wait for the data timestamp to pass "
        f"{at:%Y-%m-%d %H:%M:%S} UTC, the timestamp of its version {version + 1}, {_duration(ahead)} "
        f"{CLOCK_SKEW} (its writer's clock is ahead: fix that machine's clock)"
    )


def _duration(ms: int) -> str:
    seconds = ms // 1000
    return (
        f"{seconds // 3600} h {seconds % 3600 // 60} min"
        if seconds >= 3600
        else f"{seconds // 60} min {seconds % 60} s"
    )


def _dt_changed(dt_log: Optional[DeltaLog], frontier: Optional[Frontier]) -> Optional[str]:
    """Why the DT's own log does not hold the version its last refresh produced, or why its
    rows changed since (a write outside dbt-dyntable); compaction commits change no rows."""
    if frontier is None or dt_log is None:
        return None
    lost = dt_log.lost_commit(frontier.dt_version, frontier.dt_commit or "")
    if lost is not None:
        return lost
    changed = dt_log.data_change_after(frontier.dt_version)
    return f"its rows were changed outside dbt-dyntable at {changed}" if changed else None
