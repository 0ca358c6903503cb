"""Refreshing one dynamic table: the single code path of `dbt run` and the `dyntable` runner.

A refresh at data timestamp T (DESIGN §2, §6):

1. takes the DT's cross-process lock and resolves a pending intent left by a crash, from the DT's
   own Delta log (the commit after the intent's base version exists → it committed);
2. resolves every source as of T: base tables at their latest version committed at or before T,
   upstream DTs at the version their refresh at T produced;
3. chooses the action: REINITIALIZE (first build, --full-refresh, changed definition or refresh
   mode, history that cannot be differentiated), NO_DATA (no source moved: decided from Delta log
   metadata alone), INCREMENTAL or FULL;
4. records the intent, makes exactly one Delta commit on the DT, then records the new frontier
   and a refresh-history row.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Dict, FrozenSet, Iterator, List, Mapping, Optional, Set, Tuple

from dbt.adapters.dyntable.dynamic_table.apply import DeltaApplier
from dbt.adapters.dyntable.dynamic_table.config import DynamicTableConfig, definition_hash
from dbt.adapters.dyntable.dynamic_table.failpoints import failpoint
from dbt.adapters.dyntable.dynamic_table.locking import RefreshLock
from dbt.adapters.dyntable.dynamic_table.metadata import (
    Frontier,
    GraphRow,
    HistoryRow,
    Intent,
    MetadataStore,
    utcnow,
)
from dbt.adapters.dyntable.dynamic_table.pinning import base_tables, expand_views, pin_query
from dbt.adapters.dyntable.engines.base import Engine
from dbt.adapters.dyntable.engines.warehouse import quote

if TYPE_CHECKING:
    from dbt.adapters.dyntable.delta_log import DeltaLog
    from dbt.adapters.dyntable.differentiation import Plan

logger = logging.getLogger(__name__)

#: AUTO refreshes FULL when the changed bytes exceed this share of the sources' bytes: a delta
#: query then reads about as much as a recomputation and adds a MERGE on top.
AUTO_FULL_CHANGE_SHARE = 0.3
#: How much more a byte of rewritten files costs an incremental refresh than an appended one: both
#: versions of each rewritten file are read, their unchanged rows cancelled by a group-by over
#: every column, and the resulting deletes matched against the DT (benchmarks/results show mixed
#: changes costing several times their share of the bytes).
MIXED_CHANGE_COST = 4

#: What ``refresh_boundary(ref('x'))`` leaves beside the relation it renders in compiled
#: SQL (seed 003's DYNAMIC_TABLE_REFRESH_BOUNDARY). A comment survives dbt's compilation, needs no
#: config, and lets `dbt run` and the runner both see the boundary in the SQL they refresh.
REFRESH_BOUNDARY_MARKER = re.compile(r"/\*\s*dyntable:refresh_boundary=([^\s*]+)\s*\*/")


class RefreshError(RuntimeError):
    """A refresh failed; the DT keeps its last good version. The message names the DT and the fix."""


@dataclass(frozen=True)
class DynamicTable:
    schema: str
    identifier: str
    sql: str
    config: DynamicTableConfig
    #: Unique keys the dbt project declares on this table and the relations it reads
    #: (declared_keys.py): ``{schema.table: [key, ...]}``.
    declared_keys: Mapping[str, List[List[str]]] = field(default_factory=dict, compare=False)

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.identifier}".lower()

    @property
    def relation(self) -> str:
        return f"{quote(self.schema)}.{quote(self.identifier)}"

    @property
    def refresh_boundaries(self) -> FrozenSet[str]:
        """Relations (``schema.table``) this DT reads across a refresh boundary."""
        return refresh_boundaries(self.sql)


def refresh_boundaries(sql: str) -> FrozenSet[str]:
    return frozenset(name.lower() for name in REFRESH_BOUNDARY_MARKER.findall(sql))


def boundary_tables(sql: str, views: Mapping[str, str], schema: str) -> Set[str]:
    """The Delta tables read across a refresh boundary: each marked table, and every table
    beneath a marked view."""
    tables: Set[str] = set()
    for name in refresh_boundaries(sql):
        tables |= base_tables(f"select * from {name}", views, schema)
    return tables


@dataclass
class RefreshResult:
    name: str
    action: Optional[str]  # None when the refresh did not run (SKIPPED before choosing one)
    state: str
    reason: str
    data_timestamp: Optional[datetime]
    rows_inserted: int = 0
    rows_deleted: int = 0
    dt_version: Optional[int] = None
    message: str = ""
    source_versions: Dict[str, int] = field(default_factory=dict)
    #: Things the user should hear about though the refresh succeeded (dbt and the CLI show them).
    warnings: List[str] = field(default_factory=list)


@dataclass(frozen=True)
class OutputKey:
    """The columns a refresh matches the DT's rows on (None: whole rows), and, when the key is
    declared rather than proven by the plan, who declared it (the refresh checks it first)."""

    columns: Optional[List[str]]
    declared_by: Optional[str] = None

    def describe(self) -> str:
        if self.columns is None:
            return "(none: rows are matched whole, as a multiset)"
        listed = ", ".join(self.columns) or "(none: one row)"
        return f"{listed} ({'declared by ' + self.declared_by if self.declared_by else 'proven by the plan'})"


def output_key(plan: "Plan", dt: DynamicTable) -> OutputKey:
    """The row key of the DT: the plan's proven key, else the model's ``unique_key`` config, else
    a unique test or constraint on the model, else a key the plan derives from its sources'
    declared keys."""
    if plan.row_key is not None and not plan.row_key_is_declared:
        return OutputKey(plan.row_key)
    by_name = {c.lower(): c for c in plan.columns}
    own = [("the unique_key config", list(dt.config.unique_key))] if dt.config.unique_key else []
    own += [
        (f"a unique test or constraint on {', '.join(key)}", key)
        for key in dt.declared_keys.get(dt.name, [])
    ]
    for origin, key in own:
        if all(c.lower() in by_name for c in key):
            return OutputKey([by_name[c.lower()] for c in key], origin)
    if plan.row_key is not None:
        return OutputKey(plan.row_key, "unique tests or constraints on its sources")
    return OutputKey(None)


@dataclass(frozen=True)
class SourceState:
    """A source's version at the frontier (``start``) and as of the refresh's T (``end``)."""

    name: str
    log: "DeltaLog"
    start: Optional[int]
    end: int
    is_dynamic_table: bool


class Refresher:
    """Refreshes dynamic tables on one engine, with one metadata store."""

    def __init__(self, engine: Engine, metadata: MetadataStore, locks: Path) -> None:
        self.engine = engine
        self.metadata = metadata
        self.locks = locks

    # -- entry point -----------------------------------------------------------------------------

    def refresh(
        self,
        dt: DynamicTable,
        data_timestamp: datetime,
        trigger: str,
        full_refresh: bool = False,
    ) -> RefreshResult:
        started = utcnow()
        refresh_id = uuid.uuid4().hex
        with RefreshLock(self.locks, dt.name):
            frontier = self._recover(dt, self.metadata.frontier(dt.name))
            try:
                warnings: List[str] = []
                result = self._refresh_locked(
                    dt, frontier, data_timestamp, full_refresh, refresh_id, warnings, trigger
                )
                result.warnings = warnings
            except Exception as exc:
                message = str(exc)
                self._record(dt, refresh_id, trigger, started, RefreshResult(
                    dt.name, getattr(exc, "action", None) or "UNKNOWN", "FAILED",
                    getattr(exc, "reason", "") or "", data_timestamp, message=message,
                ))
                raise
            self._record(dt, refresh_id, trigger, started, result)
            return result

    # -- the steps -------------------------------------------------------------------------------

    def _recover(self, dt: DynamicTable, frontier: Optional[Frontier]) -> Optional[Frontier]:
        """Finish or discard an intent a crashed refresh left behind (DESIGN §6)."""
        if frontier is None or frontier.pending is None:
            return frontier
        intent = frontier.pending
        log = self._log(dt.schema, dt.identifier)
        latest = log.latest_version() if log is not None else None
        now = utcnow()
        if latest is not None and latest > intent.base_version:
            recovered = self.metadata.commit_intent(dt.name, intent, latest)
            state, message = "SUCCEEDED", f"recovered: the crashed refresh committed version {latest}"
        else:
            self.metadata.discard_intent(frontier)
            recovered = self.metadata.frontier(dt.name)
            state, message = "CANCELLED", "recovered: the crashed refresh never committed; discarded"
        self.metadata.append_history(HistoryRow(
            name=dt.name, refresh_id=intent.refresh_id, data_timestamp=intent.data_timestamp,
            state=state, refresh_action=intent.action, refresh_trigger="RECOVERY",
            refresh_start_time=now, refresh_end_time=now, reason="pending intent found at start",
            state_message=message, source_versions=intent.source_versions,
            dt_version=latest if state == "SUCCEEDED" else None,
        ))
        logger.info("dyntable: %s %s", dt.name, message)
        return recovered if recovered is None or recovered.dt_version >= 0 else None

    def _refresh_locked(
        self,
        dt: DynamicTable,
        frontier: Optional[Frontier],
        data_timestamp: datetime,
        full_refresh: bool,
        refresh_id: str,
        warnings: List[str],
        trigger: str,
    ) -> RefreshResult:
        sql, digest = dt.sql, definition_hash(dt.sql, dt.config)
        dt_log = self._log(dt.schema, dt.identifier)
        reason: Optional[str] = None
        if dt_log is None and dt.config.initialize == "on_schedule" and trigger == "DBT_RUN":
            return self._create_uninitialized(dt, data_timestamp)
        if dt_log is None:
            reason = "first build"
        elif full_refresh:
            reason = "--full-refresh"
        elif frontier is None:
            reason = (
                "first refresh (initialize: on_schedule)" if dt.config.initialize == "on_schedule"
                else "no frontier recorded for this table"
            )
        elif frontier.definition_hash != digest:
            policy = dt.config.on_configuration_change
            if policy == "fail":
                raise RefreshError(
                    f"Dynamic table {dt.name}: its definition changed and on_configuration_change "
                    "is 'fail'. Run with --full-refresh, or set on_configuration_change to 'apply'."
                )
            if policy == "continue":
                warnings.append(
                    f"Dynamic table {dt.name}: its definition changed but on_configuration_change "
                    "is 'continue': keeping the previous definition until a --full-refresh."
                )
                sql, digest = frontier.definition, frontier.definition_hash
            else:
                reason = "definition changed"
        elif frontier.refresh_mode != dt.config.refresh_mode:
            reason = f"refresh mode changed from {frontier.refresh_mode} to {dt.config.refresh_mode}"

        views = self.views_for(sql, dt.schema)
        sources, effective_ts = self._resolve_sources(
            sql, views, dt.schema, data_timestamp, frontier if reason is None else None
        )
        versions = {s.name: s.end for s in sources}
        base = dict(definition_hash=digest, refresh_mode=dt.config.refresh_mode, definition=sql)
        if reason is None:
            assert frontier is not None and dt_log is not None
            # Decided before planning: a NO_DATA refresh reads Delta logs and metadata only.
            if effective_ts < frontier.data_timestamp:
                return RefreshResult(dt.name, "NO_DATA", "SKIPPED",
                                     "an upstream dynamic table is behind this one", frontier.data_timestamp,
                                     dt_version=frontier.dt_version, source_versions=frontier.source_versions)
            if versions == frontier.source_versions:
                self.metadata.commit_intent(dt.name, Intent(
                    refresh_id, effective_ts, versions, frontier.dt_version, action="NO_DATA", **base),
                    frontier.dt_version)
                return RefreshResult(dt.name, "NO_DATA", "SUCCEEDED", "no source changed",
                                     effective_ts, dt_version=frontier.dt_version, source_versions=versions)
        plan, not_incremental = (
            (None, None) if dt.config.refresh_mode == "full" else self.plan(dt, sql, views, sources)
        )
        if dt.config.refresh_mode == "incremental" and not_incremental is not None:
            raise RefreshError(
                f"Dynamic table {dt.name} has refresh_mode 'incremental' but its query cannot be "
                f"refreshed incrementally: {not_incremental}. Rewrite that part of the query, or "
                "set refresh_mode to 'auto' or 'full'."
            )
        if reason is not None:
            return self._rebuild(dt, dt_log, "REINITIALIZE", reason, sql, views, versions,
                                 effective_ts, refresh_id, base)
        intervals = {s.name: s.log.interval(s.start, s.end) for s in sources if s.start != s.end}
        blocked = [f"{n}: {i.undifferentiable_reason}" for n, i in intervals.items()
                   if i.undifferentiable_reason]
        if any(s.start is None for s in sources):
            blocked.append("a source is new to this table")
        if blocked:
            return self._rebuild(dt, dt_log, "REINITIALIZE", "; ".join(blocked), sql, views,
                                 versions, effective_ts, refresh_id, base)
        if plan is None:
            why = f"not incrementalizable: {not_incremental}" if not_incremental else "refresh_mode is full"
            return self._rebuild(dt, dt_log, "FULL", why, sql, views, versions, effective_ts,
                                 refresh_id, base)
        if dt.config.refresh_mode == "auto":
            from dbt.adapters.dyntable.delta_log import IntervalKind

            changed = sum(
                (i.added_bytes + i.removed_bytes)
                * (1 if i.kind is IntervalKind.ADDED_ONLY else MIXED_CHANGE_COST)
                for i in intervals.values()
            )
            total = sum(
                f.size_bytes for s in sources for f in s.log.snapshot(s.end).files.values()
            ) or 1
            if changed > AUTO_FULL_CHANGE_SHARE * total:
                return self._rebuild(
                    dt, dt_log, "FULL",
                    f"changes weigh {changed / total:.0%} of the sources' bytes (over "
                    f"{AUTO_FULL_CHANGE_SHARE:.0%}): recomputing is cheaper",
                    sql, views, versions, effective_ts, refresh_id, base)
        return self._incremental(dt, dt_log, frontier, plan, sources, effective_ts, refresh_id, base,
                                 warnings)

    # -- actions ---------------------------------------------------------------------------------

    def _rebuild(self, dt, dt_log, action, reason, sql, views, versions, ts, refresh_id, base):
        with self.pinned_query(sql, versions, views, dt.schema) as pinned:
            applier = DeltaApplier(self.engine, dt)
            if dt_log is None:
                applier.create_empty(pinned)
                dt_log = self._log(dt.schema, dt.identifier)
                assert dt_log is not None
                self.metadata.forget(dt.name)
            current = self.metadata.frontier(dt.name)
            base_version = dt_log.latest_version()
            intent = Intent(refresh_id, ts, versions, base_version, action=action, **base)
            self.metadata.record_intent(dt.name, current, intent)
            failpoint("after_intent")
            failpoint("during_apply")
            inserted, deleted = applier.overwrite(pinned)
            failpoint("after_apply")
        dt_version = dt_log.latest_version()
        self.metadata.commit_intent(dt.name, intent, dt_version)
        return RefreshResult(dt.name, action, "SUCCEEDED", reason, ts, inserted, deleted,
                             dt_version, source_versions=versions)

    def _create_uninitialized(self, dt: DynamicTable, data_timestamp: datetime) -> RefreshResult:
        """``initialize: on_schedule``: create the table empty, with no frontier; the runner's
        first due tick (or the next `dbt run`) fills it."""
        DeltaApplier(self.engine, dt).create_empty(dt.sql)  # only its schema is read
        return RefreshResult(
            dt.name, None, "SKIPPED",
            "initialize is 'on_schedule': created empty; the first scheduled refresh fills it",
            data_timestamp,
        )

    @contextmanager
    def pinned_query(
        self, sql: str, versions: Mapping[str, int], views: Mapping[str, str], schema: str
    ) -> Iterator[str]:
        """The query with every source read at its version, valid inside the ``with``."""
        from dbt.adapters.dyntable.changes import VersionedRelations

        with VersionedRelations(self.engine.spark, self.engine.capabilities) as relations:
            yield pin_query(
                sql, versions, views, schema,
                read_at=lambda name, version: relations.view(self._log(*name.split(".", 1)), version),
            )

    def _incremental(self, dt, dt_log, frontier, plan, sources, ts, refresh_id, base, warnings):
        from dbt.adapters.dyntable.changes import FileSetResolver
        from dbt.adapters.dyntable.differentiation import differentiate

        versions = {s.name: s.end for s in sources}
        resolver = FileSetResolver(
            self.engine.spark,
            {s.name: (s.log, s.start, s.end) for s in sources},
            capabilities=self.engine.capabilities,
        )
        try:
            delta = differentiate(plan, resolver, stored=dt.relation)
            applier = DeltaApplier(self.engine, dt)
            key = output_key(plan, dt)
            staged = applier.prepare(delta.sql, list(plan.columns), key.columns, key.declared_by)
            if staged.warning:
                warnings.append(staged.warning)
            base_version = dt_log.latest_version()
            intent = Intent(refresh_id, ts, versions, base_version, action="INCREMENTAL", **base)
            if staged.is_empty:
                self.metadata.commit_intent(dt.name, intent, base_version)
                return RefreshResult(dt.name, "INCREMENTAL", "SUCCEEDED",
                                     "sources changed; the query's result did not", ts, 0, 0,
                                     base_version, source_versions=versions)
            self.metadata.record_intent(dt.name, frontier, intent)
            failpoint("after_intent")
            failpoint("during_apply")
            inserted, deleted = applier.apply(staged)
            failpoint("after_apply")
        finally:
            resolver.close()
        dt_version = dt_log.latest_version()
        self.metadata.commit_intent(dt.name, intent, dt_version)
        return RefreshResult(dt.name, "INCREMENTAL", "SUCCEEDED", "sources changed", ts,
                             inserted, deleted, dt_version, source_versions=versions)

    # -- sources ---------------------------------------------------------------------------------

    def _log(self, schema: str, name: str) -> Optional["DeltaLog"]:
        from dbt.adapters.dyntable.delta_log import DeltaLog

        location = self.engine.table_location(schema, name)
        if location is None or not (Path(location) / "_delta_log").is_dir():
            return None
        return DeltaLog(location)

    def views_for(self, sql: str, default_schema: str) -> Dict[str, str]:
        """Definitions of every view the query reads, transitively, keyed ``schema.view``."""
        views: Dict[str, str] = {}
        seen: set = set()
        pending = [(sql, default_schema)]
        while pending:
            text, schema = pending.pop()
            for name in base_tables(text, {}, schema) - seen:
                seen.add(name)
                view_schema, view_name = name.split(".", 1)
                definition = self.engine.view_definition(view_schema, view_name)
                if definition is not None:
                    views[name] = definition
                    pending.append((definition, view_schema))
        return views

    def _resolve_sources(
        self, sql: str, views: Mapping[str, str], schema: str, ts: datetime,
        frontier: Optional[Frontier],
    ) -> Tuple[List[SourceState], datetime]:
        """Each source's version as of T. Upstream DTs are read at the version their refresh at T
        produced; if one has not reached T, T moves back to its data timestamp (DVS).

        Across a refresh boundary there is no common T (seed 003): a DT is read at the version
        its latest refresh produced, a table at its latest version, and neither holds T back."""
        names = sorted(base_tables(sql, views, schema))
        across = boundary_tables(sql, views, schema)
        frontiers = self.metadata.frontiers()
        upstream = {n: frontiers[n] for n in names if n in frontiers}
        effective = min(
            [ts] + [f.data_timestamp for n, f in upstream.items() if n not in across]
        )
        states = []
        for name in names:
            source_schema, source_name = name.split(".", 1)
            log = self._log(source_schema, source_name)
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
                found = log.version_at(int(effective.timestamp() * 1000))
                if found is None and name in self.metadata.graph():
                    raise RefreshError(
                        f"Source {name} is a dynamic table that is not initialized yet (initialize: "
                        "on_schedule). Let the runner's first tick fill it, run `dbt run -s` on it "
                        "first, or set initialize: on_schedule on this model too."
                    )
                if found is None:
                    raise RefreshError(
                        f"Source {name} did not exist at the data timestamp {effective.isoformat()}."
                    )
                version = found
            start = frontier.source_versions.get(name) if frontier else None
            states.append(SourceState(name, log, start, version, name in upstream))
        return states, effective

    def plan(
        self, dt: DynamicTable, sql: str, views: Mapping[str, str], sources: List[SourceState]
    ) -> Tuple[Optional["Plan"], Optional[str]]:
        """The differentiation plan of ``sql`` (views expanded), or None and the reason it cannot
        be refreshed incrementally. The planner gets each source's columns from its Delta log
        (for ``*`` and unqualified columns), the keys the project declares, and the model's
        deterministic UDFs."""
        from dbt.adapters.dyntable.differentiation import NotIncrementalizable, plan_query

        try:
            return plan_query(
                expand_views(sql, views, dt.schema).sql(dialect="spark"),
                unique_keys=dt.declared_keys,
                deterministic_functions=frozenset(dt.config.deterministic_functions),
                schema={s.name: s.log.schema_at(s.end).fieldNames() for s in sources},
            ), None
        except NotIncrementalizable as exc:
            return None, str(exc)

    def explain(self, dt: DynamicTable) -> str:
        """How ``dt`` refreshes as of its sources' latest versions: the plan, the rule at each node,
        the row key and the delta SQL, or why it refreshes FULL."""
        from dbt.adapters.dyntable.differentiation import explain

        if dt.config.refresh_mode == "full":
            return (
                f"{dt.name} refreshes FULL: its refresh_mode is 'full', so every refresh whose "
                "sources changed recomputes the whole query (unchanged sources: NO_DATA)."
            )
        views = self.views_for(dt.sql, dt.schema)
        sources, _ = self._resolve_sources(dt.sql, views, dt.schema, utcnow(), None)
        plan, reason = self.plan(dt, dt.sql, views, sources)
        if plan is None:
            return (
                f"{dt.name} refreshes FULL (refresh_mode {dt.config.refresh_mode}): its query is "
                f"not incrementalizable: {reason}"
            )
        return (
            f"{dt.name}\noutput key: {output_key(plan, dt).describe()}\n"
            f"{explain(plan, stored=dt.relation)}"
        )

    # -- history ---------------------------------------------------------------------------------

    def _record(self, dt, refresh_id, trigger, started, result: RefreshResult) -> None:
        if result.reason == "first build":
            trigger = "CREATION"
        self.metadata.append_history(HistoryRow(
            name=dt.name, refresh_id=refresh_id, data_timestamp=result.data_timestamp,
            state=result.state, refresh_action=result.action, refresh_trigger=trigger,
            refresh_start_time=started, refresh_end_time=utcnow(), reason=result.reason,
            state_message=result.message or None, rows_inserted=result.rows_inserted,
            rows_deleted=result.rows_deleted, source_versions=result.source_versions,
            dt_version=result.dt_version,
        ))
