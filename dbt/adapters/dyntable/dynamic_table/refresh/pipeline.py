"""One refresh of one dynamic table: the single code path of `dbt run` and the `dyntable` runner
(docs/ARCHITECTURE.md, "The path of one refresh").

Under the DT's cross-process lock, after resolving what a crashed refresh left:

1. **decide** (``decide.py``): read the sources' Delta logs as of T and choose NO_DATA,
   REINITIALIZE, FULL or INCREMENTAL, with the reason;
2. **plan** (``planned_query.py``): the query's differentiation plan and row key, when the action
   needs it;
3. **derive** (``delta_query.py``): the delta query, or the query pinned at the sources' versions;
4. **apply** (``incremental.py`` or ``rebuild.py``): the delta applied by the engine alone, or
   staged and validated here (``apply.py``), then exactly one Delta commit on the DT by the
   writer ``write.py`` chooses;
5. **record** (``commit.py``, ``record.py``): intent before the commit, frontier and history after.

Before its history row is written, a refresh keeps the DT's table features (clustering, comments),
with the ``verify`` config compares the DT with its query, and compacts the DT's small files when
they are due (``compact.py``; docs/ARCHITECTURE.md, "Table features", "Verifying" and
"Compaction").
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Callable, Optional, Sequence, Tuple, Union

from dbt.adapters.dyntable.delta_log import DeltaLog
from dbt.adapters.dyntable.differentiation.aggregate import UNFOLDABLE
from dbt.adapters.dyntable.dynamic_table.failpoints import failpoint
from dbt.adapters.dyntable.dynamic_table.lifecycle import (
    Action,
    RefreshRequest,
    SchedulingState,
    State,
    Trigger,
)
from dbt.adapters.dyntable.dynamic_table.locking import RefreshLock
from dbt.adapters.dyntable.dynamic_table.metadata import Frontier, MetadataDamaged, MetadataStore, utcnow
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.pinning import read_views
from dbt.adapters.dyntable.dynamic_table.refresh import (
    compact,
    damaged,
    decide,
    delta_query,
    failures,
    guard,
    lease_free,
    net_change,
    partitions,
    planned_query,
)
from dbt.adapters.dyntable.dynamic_table.refresh.apply import FULL_REFRESH_FIX, DeltaValidationError
from dbt.adapters.dyntable.dynamic_table.refresh.commit import Refresh, no_data
from dbt.adapters.dyntable.dynamic_table.refresh.estimate import estimate
from dbt.adapters.dyntable.dynamic_table.refresh.facts import Decision, Definition, Observation
from dbt.adapters.dyntable.dynamic_table.refresh.incremental import incremental
from dbt.adapters.dyntable.dynamic_table.refresh.rebuild import check_output, create_empty, rebuild
from dbt.adapters.dyntable.dynamic_table.refresh.record import Recorder, RefreshFailed, RefreshResult
from dbt.adapters.dyntable.dynamic_table.refresh.target import Target
from dbt.adapters.dyntable.dynamic_table.table_features import TableFeatures
from dbt.adapters.dyntable.dynamic_table.verify import DvsCheck, VerifyFailed, verify
from dbt.adapters.dyntable.engines.base import Engine
from dbt.adapters.dyntable.table_damage import damage
from dbt.adapters.dyntable.vocabulary import first_line

#: What `dbt run --empty` does to a DT that exists, and to one that does not.
EMPTY_KEPT = "dbt --empty: not refreshed; the table keeps its rows and data timestamp"
EMPTY_CREATED = "dbt --empty: created empty with the query's columns; a run without --empty fills it"
#: What `initialize: on_schedule` does under `dbt run` to a DT that does not exist.
CREATED_EMPTY = "initialize is 'on_schedule': created empty; the first scheduled refresh fills it"
#: How long `dbt run` waits for another process's refresh of a DT (a runner's) before failing it.
LOCK_WAIT_SECONDS = 300.0


@dataclass(frozen=True)
class Attempt:
    """One refresh of ``dt`` that ``request`` asked for: its id in the history, and the DT's lock
    it runs under (None: deciding a NO_DATA without the lease, docs/ARCHITECTURE.md, "Object
    storage")."""

    dt: DynamicTable
    refresh_id: str
    request: RefreshRequest
    lock: Optional[RefreshLock]


class RefreshPipeline:
    """Refreshes dynamic tables on one engine, with one metadata store."""

    def __init__(self, engine: Engine, metadata: MetadataStore, locks: Union[str, Path]) -> None:
        self.engine = engine
        self.metadata = metadata
        self.recorder = Recorder(metadata)
        self.locks = locks

    def refresh(self, dt: DynamicTable, request: RefreshRequest) -> RefreshResult:
        refresh_id = uuid.uuid4().hex
        # `dbt run` waits for a refresh another process is running; the runner moves on.
        wait = LOCK_WAIT_SECONDS if request.trigger is Trigger.DBT_RUN else 0.0
        if lease_free.may_decide(self.metadata, dt, request):
            # NO_DATA is decided without the DT's lease where taking it costs writes; anything
            # else is decided again under it (docs/ARCHITECTURE.md, "Object storage").
            with self.metadata.one_look(batch_wide=True):
                frontier = self.metadata.frontier(dt.name)
                if lease_free.settled(frontier):
                    with contextlib.suppress(lease_free.NeedsLease):
                        return self._run(Attempt(dt, refresh_id, request, None), frontier)
        with RefreshLock(self.locks, dt.name, wait) as lock, self.metadata.one_look():
            frontier = self.recorder.recover(dt, self._dt_log(dt))
            return self._run(Attempt(dt, refresh_id, request, lock), frontier)

    def _run(self, attempt: Attempt, frontier: Optional[Frontier]) -> RefreshResult:
        """The refresh from its frontier, under its lock; without it, only a NO_DATA that settles
        without it, else :class:`lease_free.NeedsLease`."""
        dt, refresh_id, request, lock = attempt.dt, attempt.refresh_id, attempt.request, attempt.lock
        # After the recovery it may record: history lists a crashed refresh before this one.
        started = utcnow()
        if request.empty:
            return self._empty(dt, request)
        try:
            result, decision = self._refresh_again_if_moved_on(attempt, frontier)
        except Exception as exc:
            if lock is None:
                raise lease_free.NeedsLease() from exc  # unsure: decided again under the lease
            failed = exc if isinstance(exc, RefreshFailed) else self._failure(dt, None, exc)
            if isinstance(failed.error, guard.ChangeFuseTripped):
                self.recorder.schedule(dt, SchedulingState.SUSPENDED)
            # The failure may be the history table's own: then the error is what remains.
            with contextlib.suppress(MetadataDamaged):
                self.recorder.refreshed(
                    dt, refresh_id, request.trigger, started, failed.result(request.data_timestamp)
                )
            raise failed from failed.error
        planned = decision.planned if decision else None
        self._finish(dt, result, planned.key.columns if planned else None)
        compact.compact_after(self.engine, dt, result)
        self.recorder.refreshed(dt, refresh_id, request.trigger, started, result)
        result.warnings += self.metadata.take_warnings()
        reached = result.action is not None and result.state is not State.SKIPPED
        if lock is not None and reached and result.data_timestamp:
            lock.record(result.data_timestamp)  # what its frontier says once written
        failpoint("after_refresh")  # inside a batch, its frontier is not written yet
        if result.state is State.FAILED:
            mismatch = VerifyFailed(result.message)
            raise RefreshFailed(dt, result.action, result.reason, State.FAILED, result.message, mismatch)
        return result

    def _failure(self, dt: DynamicTable, action: Optional[Action], error: Exception) -> RefreshFailed:
        """The failure of ``dt``'s refresh, which ``error`` failed having chosen ``action``
        (None: before it chose one): the change fuse's own action and reason, the error told as
        ``failures.explained`` says, CANCELLED where Ctrl-C cancelled it (no failure of the DT's
        to back off from or count)."""
        reason = ""
        if isinstance(error, guard.ChangeFuseTripped):
            action, reason = error.action, error.reason
        told = failures.explained(self.engine, self.metadata, dt, error, action)
        if told is not error:
            told.__cause__ = error
        state = State.CANCELLED if self.engine.interrupted else State.FAILED
        return RefreshFailed(dt, action, reason, state, self.engine.failure_message(told), error)

    def _refresh_again_if_moved_on(
        self, attempt: Attempt, frontier: Optional[Frontier]
    ) -> Tuple[RefreshResult, Optional[Decision]]:
        """The refresh, run once more where a source moved on past what its engine can read of
        the version observed (a checkpoint written meanwhile): observed again, it is read from
        its files (docs/ARCHITECTURE.md, "Engines"). Without the lease, once."""
        try:
            return self._refresh(attempt, frontier)
        except Exception as exc:
            if attempt.lock is None or not self.engine.read_moved_on(
                exc.error if isinstance(exc, RefreshFailed) else exc
            ):
                raise
        frontier = self.recorder.recover(attempt.dt, self._dt_log(attempt.dt))
        return self._refresh(attempt, frontier)

    def _empty(self, dt: DynamicTable, request: RefreshRequest) -> RefreshResult:
        """`dbt run --empty` (docs/ARCHITECTURE.md, "dbt run --empty"): the query, every source
        read as 0 rows, is only checked, and the DT created empty where it does not exist, so the
        models reading it run too. A DT is never refreshed from it: rebuilt, it would hold no
        rows; refreshed, it would record a definition no run without --empty has."""
        target = Target(self.engine, dt)
        check_output(target, dt.sql)
        exists = self._dt_log(dt) is not None
        warnings = [] if exists else create_empty(target, dt.sql)
        message = EMPTY_KEPT if exists else EMPTY_CREATED
        self.recorder.not_refreshed(dt, request.data_timestamp, request.trigger, State.SKIPPED, message)
        return RefreshResult(dt.name, None, State.SKIPPED, message, request.data_timestamp, warnings=warnings)

    # -- after a refresh -------------------------------------------------------------------------

    def _finish(self, dt: DynamicTable, result: RefreshResult, key: Optional[Sequence[str]]) -> None:
        """Keep the table features of a DT a refresh left in place (clustering after it was
        written, comments always), then verify it when its config asks; a mismatch makes the
        result FAILED (``verify_failure: error``) or warns."""
        if result.state is not State.SUCCEEDED or result.action is None:
            return
        wrote = result.action is not Action.NO_DATA
        features = TableFeatures(self.engine, dt)
        if wrote or dt.docs.table or dt.docs.columns:
            log = self._dt_log(dt)
            assert log is not None  # the refresh succeeded with an action: the DT exists
            result.warnings += features.align_clustering(log) if wrote else []
            result.warnings += features.align_comments(log) if dt.docs.table or dt.docs.columns else []
        if not wrote or dt.config.verify is None:
            return
        try:
            check = verified(
                self.engine, self.metadata, dt, dt.config.verify, key or dt.config.unique_key or None
            )
        except Exception as exc:  # noqa: BLE001 - a check that cannot run does not undo the refresh
            check = DvsCheck(dt.name, False, 0, f"not verified: {first_line(exc)}", None, compared=False)
        result.verified = check.detail
        if check.ok:
            return
        if not check.compared:
            result.warnings.append(f"Model '{dt.model}': dynamic table {dt.name} was {check.detail}.")
            return
        fix = FULL_REFRESH_FIX.replace("<model>", dt.model or dt.name)
        mismatch = (
            f"does not equal its query at its data timestamp "
            f"{result.data_timestamp:%Y-%m-%d %H:%M:%S} UTC: {check.detail}. Its {result.action} refresh "
            f"committed version {result.dt_version}. {fix}"
        )
        if dt.config.verify_failure == "warn":
            result.warnings.append(f"Model '{dt.model}': dynamic table {dt.name} {mismatch}")
        else:
            result.state, result.message = State.FAILED, f"the table {mismatch}"

    # -- the stages ------------------------------------------------------------------------------

    def _refresh(
        self, attempt: Attempt, frontier: Optional[Frontier]
    ) -> Tuple[RefreshResult, Optional[Decision]]:
        """The refresh and what it decided (None: it stopped before deciding); a failure after
        it decided is a :class:`RefreshFailed` with the decision's action."""
        dt, request, lock = attempt.dt, attempt.request, attempt.lock
        # Without the lease the DT's log is read by observe() alone, which says if it exists.
        dt_log = self._dt_log(dt) if lock is not None else None
        exists = dt_log is not None or lock is None
        reached = lock.reached if lock is not None else None
        if decide.creates_empty(dt, exists, request):
            warnings = create_empty(Target(self.engine, dt), dt.sql)  # only its schema is read
            when = request.data_timestamp
            return RefreshResult(dt.name, None, State.SKIPPED, CREATED_EMPTY, when, warnings=warnings), None
        definition, dt_log = self._maintained(dt, frontier, dt_log, request, exists)
        held = decide.held_data_timestamp(frontier, reached)
        requested = request.data_timestamp
        if held is not None and definition.rebuild_reason is not None and requested < held:
            # A rebuild a person asked for (--full-refresh, a new definition) is done as of the
            # later data timestamp another refresh reached: readers never see the DT go back.
            request = replace(request, data_timestamp=held)
        try:
            observed = decide.observe(self.engine, self.metadata, dt, definition, frontier, request)
        except decide.SourceNotReady as waiting:
            if lock is None:
                raise
            return RefreshResult(dt.name, None, State.SKIPPED, str(waiting), request.data_timestamp), None
        if lock is None:
            lease_free.check_observed(definition, observed)
        plan = partial(planned, dt, definition, observed)  # cached per process: planned once
        if definition.rebuild_reason is None:
            observed = net_change.measured(self.engine, dt.name, observed, dt_log, plan)
            observed = partitions.measured(self.engine, dt, observed, plan)
        timestamps = (requested, request.data_timestamp)
        decision = self._decide(dt, definition, frontier, observed, plan, held, timestamps)
        if lock is None:
            lease_free.check_settles(self.recorder, dt, observed, decision)
        # The fuse guards what the data causes, not what a person asked for (a first build,
        # --full-refresh, a new definition), and lets through a change they accepted.
        guarded = guard.is_guarded(dt) and definition.rebuild_reason is None
        guarded = guarded and not self.recorder.change_accepted(dt)
        refresh = Refresh(
            dt, attempt.refresh_id, definition, frontier, observed, decision, guarded, lock is None
        )
        try:
            result = self._act(refresh, dt_log, request.trigger)
        except Exception as exc:
            raise self._failure(dt, decision.action, exc) from exc
        # A source whose writer's clock runs ahead holds its newer commits back: said every time.
        result.warnings += [
            f"Model '{dt.model}': dynamic table {dt.name} reads {why}." for why in observed.waiting
        ]
        return result, decision

    def _decide(
        self,
        dt: DynamicTable,
        definition: Definition,
        frontier: Optional[Frontier],
        observed: Observation,
        plan: Callable[[], planned_query.PlannedOrNot],
        held: Optional[datetime],
        timestamps: Tuple[datetime, datetime],
    ) -> Decision:
        """The decision, its reason saying where the data timestamp was raised to ``held`` (the
        ``timestamps`` requested and refreshed at) and which sources hold newer commits back."""
        requested, refreshed_at = timestamps
        decision = decide.decide(
            dt,
            definition,
            frontier,
            observed,
            plan,
            self.engine.capabilities,
            held,
        )
        if held is not None and decision.rebuilds and refreshed_at > requested:
            decision = replace(decision, reason=f"{decision.reason}; {decide.raised_for(held, requested)}")
        if observed.waiting and decision.action is not Action.NO_DATA:
            decision = replace(decision, reason="; ".join([decision.reason, *observed.waiting]))
        return decision

    def _maintained(
        self,
        dt: DynamicTable,
        frontier: Optional[Frontier],
        dt_log: Optional[DeltaLog],
        request: RefreshRequest,
        exists: bool,
    ) -> Tuple[Definition, Optional[DeltaLog]]:
        """The definition the refresh maintains, and the DT's log: none where `--full-refresh`
        found the DT's own files damaged and set it aside, to be built anew (docs/ARCHITECTURE.md,
        "Damage")."""
        definition = decide.maintained_definition(dt, frontier, exists, request)
        if dt_log is None or definition.rebuild_reason != decide.FULL_REFRESH:
            return definition, dt_log
        found = damage(dt_log.location)
        if found is None:
            return definition, dt_log
        moved = damaged.set_aside(self.engine, dt, dt_log.location)
        why = f"{decide.FULL_REFRESH}; its table was damaged ({found}): moved to {moved}, built anew"
        return replace(definition, rebuild_reason=why), None

    def _act(self, refresh: Refresh, dt_log: Optional[DeltaLog], trigger: Trigger) -> RefreshResult:
        """Carry out the refresh's decision."""
        dt, observed, decision = refresh.dt, refresh.observed, refresh.decision
        if decision.action is Action.NO_DATA:
            result = no_data(self.recorder, refresh)
            if observed.held_by and trigger is Trigger.DBT_RUN:
                result.warnings.append(
                    f"Model '{dt.model}': dynamic table {dt.name} stays at data timestamp "
                    f"{observed.data_timestamp:%Y-%m-%d %H:%M:%S} UTC: upstream dynamic table "
                    f"{', '.join(observed.held_by)} was not refreshed in this run. Select it too, "
                    f"e.g. dbt run --select +{dt.model}"
                )
            return result
        if decision.rebuilds:
            return rebuild(self.engine, self.recorder, refresh, dt_log)
        assert dt_log is not None and decision.planned is not None
        try:
            # Stage 3, derive, then stage 4, apply: the delta's relations live for the apply.
            sources = observed.sources
            with delta_query.delta_query(self.engine, dt, decision.planned, sources, dt_log) as derived:
                return incremental(self.engine, self.recorder, refresh, dt_log, derived)
        except DeltaValidationError as invalid:
            if not dt.config.recomputes_when_unsure:
                raise
            return after_failed_check(self.engine, self.recorder, refresh, dt_log, invalid)

    def _dt_log(self, dt: DynamicTable) -> Optional[DeltaLog]:
        return self.engine.delta_log(dt.name)


def after_failed_check(
    engine: Engine, recorder: Recorder, refresh: Refresh, dt_log: DeltaLog, invalid: DeltaValidationError
) -> RefreshResult:
    """A validation failure is never a dead end: the DT was not touched. A checked fold that
    could not tell a group's new value rescans the touched groups instead, where AUTO's
    estimate of that beats a recompute; else the DT is recomputed (docs/ARCHITECTURE.md,
    "Checked folds")."""
    why = f"the incremental delta failed validation ({invalid.detail})"
    planned = refresh.decision.planned
    if invalid.check == UNFOLDABLE and planned is not None:
        dt, observed = refresh.dt, refresh.observed
        cost = estimate(planned, observed, dt, engine.capabilities, checked_fold=False)
        if cost.incremental <= cost.full:
            rescan = f"{why}; rescanned the touched groups instead ({cost.weighed()})"
            decision = Decision(Action.INCREMENTAL, rescan, planned=planned)
            rescanned = replace(refresh, decision=decision)
            try:
                with delta_query.delta_query(
                    engine, dt, planned, observed.sources, dt_log, checked_fold=False
                ) as derived:
                    return incremental(engine, recorder, rescanned, dt_log, derived)
            except DeltaValidationError as again:
                why = f"{why}, and so did its rescan ({again.detail})"
    decision = Decision(Action.FULL, f"{why}; recomputed instead")
    return rebuild(engine, recorder, replace(refresh, decision=decision), dt_log)


def planned(dt: DynamicTable, definition: Definition, observed: Observation) -> planned_query.PlannedOrNot:
    """The plan of ``definition`` over its sources' columns at the versions observed."""
    columns = {s.name: s.log.schema_at(s.end).fieldNames() for s in observed.sources}
    return planned_query.plan(dt, definition.sql, observed.views, columns)


def verified(
    engine: Engine, metadata: MetadataStore, dt: DynamicTable, mode: str, key: Optional[Sequence[str]] = None
) -> DvsCheck:
    """Compare ``dt`` with its query at its data timestamp (``dyntable verify``, the
    ``dynamic_table_matches_query`` test, the ``verify`` config), sampling by ``key``, else by
    the row key its query proves or its ``unique_key``, else by whole rows."""
    if key is None and mode == "sample":
        key = _row_key(engine, metadata, dt)
    return verify(engine, metadata, dt.name, mode, key, dt.config.immutable_where)


def _row_key(engine: Engine, metadata: MetadataStore, dt: DynamicTable) -> Optional[Sequence[str]]:
    """The row key of the definition ``dt``'s frontier maintains, planned over its sources'
    columns at the versions consumed; else its ``unique_key``."""
    frontier = metadata.frontier(dt.name)
    if frontier is not None:
        columns = {}
        for name, version in frontier.source_versions.items():
            log = engine.delta_log(name)
            if log is not None:
                columns[name] = log.schema_at(version).fieldNames()
        views = read_views(engine, frontier.definition, dt.schema)
        found = planned_query.plan(dt, frontier.definition, views, columns)
        if isinstance(found, planned_query.PlannedQuery) and found.key.columns:
            return found.key.columns
    return dt.config.unique_key or None
