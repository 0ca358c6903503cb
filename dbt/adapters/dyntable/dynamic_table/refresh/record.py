"""Stage 5, record: the frontier, refresh history and graph history of a refresh
(docs/ARCHITECTURE.md, "Exactly once").

A refresh that changes the DT records its intent before its one commit on the DT, and the new
frontier after it: in the frontier table, or, where this process writes the DT's commit itself or
the engine appends or merges it, in that commit (:mod:`.carried`), which saves a metadata commit.
:meth:`Recorder.recover` resolves an intent a crashed refresh left behind from the DT's own Delta
log: the commit after the intent's base version exists → it committed; otherwise it never did.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Dict, List, Mapping, Optional, Tuple

from dbt.adapters.dyntable.changes import SourceReads
from dbt.adapters.dyntable.delta_log import DeltaLog, HistoryUnavailable
from dbt.adapters.dyntable.dynamic_table.changeset import definition_hash
from dbt.adapters.dyntable.dynamic_table.claims import Claim
from dbt.adapters.dyntable.dynamic_table.lifecycle import Action, SchedulingState, State, Trigger
from dbt.adapters.dyntable.dynamic_table.metadata import (
    Frontier,
    GraphRow,
    HistoryRow,
    Intent,
    MetadataStore,
    utcnow,
    versions_of,
)
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.refresh.carried import carried_intent

logger = logging.getLogger(__name__)


@dataclass
class RefreshResult:
    """What one refresh did, as history records it and dbt and the CLI report it."""

    name: str
    action: Optional[Action]  # None when no action was chosen (created empty, failed before)
    state: State
    reason: str
    data_timestamp: Optional[datetime]
    rows_inserted: int = 0
    rows_deleted: int = 0
    dt_version: Optional[int] = None
    message: str = ""
    source_versions: Dict[str, int] = field(default_factory=dict)
    #: Things the user should hear about though the refresh succeeded (dbt and the CLI show them).
    warnings: List[str] = field(default_factory=list)
    dt_commit: Optional[str] = None
    #: Row changes left out for being in the immutable region (docs/ARCHITECTURE.md, "Immutable rows").
    immutable_rows_ignored: int = 0
    #: The verification's outcome, as history records it (docs/ARCHITECTURE.md, "Verifying").
    verified: Optional[str] = None
    #: What it read of its sources (docs/ARCHITECTURE.md, "Rewritten inputs").
    source_reads: SourceReads = field(default_factory=SourceReads)

    @property
    def summary(self) -> str:
        """What dbt's line for the model shows after its status (dbt always says ``OK`` of a
        refresh that raised nothing): the action and rows, or the state of a refresh that was
        not done (``SKIPPED``: created empty, already further, --empty)."""
        done = self.state is State.SUCCEEDED and self.action is not None
        return f"{self.action if done else self.state} +{self.rows_inserted} -{self.rows_deleted}"


class RefreshFailed(Exception):
    """A refresh of ``dt`` that failed, as its history row records it: the ``action`` it had
    chosen (None: it failed before choosing), the ``reason`` it records, its ``state`` (FAILED, or
    CANCELLED by Ctrl-C or a stopping runner) and its message, what the user is told
    (docs/ARCHITECTURE.md, "Errors name the DT once"). ``error``, also its ``__cause__``, is what
    failed it."""

    def __init__(
        self,
        dt: DynamicTable,
        action: Optional[Action],
        reason: str,
        state: State,
        message: str,
        error: Exception,
    ) -> None:
        super().__init__(message)
        self.dt = dt
        self.action = action
        self.reason = reason
        self.state = state
        self.message = message
        self.error = error
        self.__cause__ = error

    def result(self, data_timestamp: datetime) -> RefreshResult:
        """The result its history row records, for a refresh asked at ``data_timestamp``."""
        return RefreshResult(
            self.dt.name, self.action, self.state, self.reason, data_timestamp, message=self.message
        )


class Recorder:
    """Writes what refreshes do into one metadata store."""

    def __init__(self, metadata: MetadataStore) -> None:
        self.metadata = metadata

    # -- the exactly-once protocol ---------------------------------------------------------------

    def recover(self, dt: DynamicTable, dt_log: Optional[DeltaLog]) -> Optional[Frontier]:
        """The DT's frontier, after finishing or discarding an intent a crashed refresh left."""
        frontier = self.metadata.frontier(dt.name)
        if frontier is None:
            return None
        if frontier.pending is None:
            return self._adopt_carried(dt, dt_log, frontier)
        intent = frontier.pending
        latest = dt_log.latest_version() if dt_log is not None else None
        if dt_log is not None and latest is not None and latest > intent.base_version:
            # Its own commit, not a compaction after it (one may follow before the frontier is
            # written at the batch's end).
            with contextlib.suppress(HistoryUnavailable):
                own = dt_log.first_data_change_after(intent.base_version)
                latest = latest if own is None else own
            commit = dt_log.commit_id(latest)
            recovered: Optional[Frontier]
            recovered, crashed = self._take_up(dt, intent, latest, commit)
            if not crashed:
                return recovered
            dt_commit: Optional[str] = commit
            state, message = State.SUCCEEDED, f"recovered: the crashed refresh committed version {latest}"
        else:
            self.metadata.discard_intent(frontier)
            recovered = self.metadata.frontier(dt.name)
            state, message = State.CANCELLED, "recovered: the crashed refresh never committed; discarded"
            dt_commit = None
        version = latest if state is State.SUCCEEDED else None
        self._recovered(dt, intent, state, message, version, dt_commit, "pending intent found at start")
        return recovered if recovered is None or recovered.dt_version >= 0 else None

    def _adopt_carried(self, dt: DynamicTable, dt_log: Optional[DeltaLog], frontier: Frontier) -> Frontier:
        """``frontier``, or the one a crashed refresh reached when the DT's first change after
        it is a commit carrying that refresh's intent: the process died before writing it."""
        if dt_log is None or dt_log.latest_version() <= frontier.dt_version:
            return frontier
        try:
            version = dt_log.first_data_change_after(frontier.dt_version)
            intent = carried_intent(dt_log.commit_info(version)) if version is not None else None
        except HistoryUnavailable:
            return frontier  # decide() rebuilds a DT whose log lost commits
        if version is None or intent is None:
            return frontier  # none, or another writer's: decide() rebuilds the DT
        if intent.base_version != version - 1 or intent.base_version < frontier.dt_version:
            return frontier
        commit = dt_log.commit_id(version)
        recovered, crashed = self._take_up(dt, intent, version, commit)
        if not crashed:
            return recovered
        message = f"recovered: the crashed refresh committed version {version}"
        found = "a commit carrying the intent of an unrecorded refresh found at start"
        self._recovered(dt, intent, State.SUCCEEDED, message, version, commit, found)
        return recovered

    def _take_up(self, dt: DynamicTable, intent: Intent, version: int, commit: str) -> Tuple[Frontier, bool]:
        """The frontier the refresh of ``intent`` reached, having committed the DT at
        ``version``, and whether that refresh crashed. It did not when its process still runs
        (it writes the frontier and history row when its batch ends) or has written them since
        this process read the frontier: it lets its writer mark go only after writing them
        (docs/ARCHITECTURE.md, "Exactly once"). Either way its frontier is taken up without a
        RECOVERY row."""
        if intent.writer is not None:
            if self.metadata.writer_alive(intent.writer):
                return self.metadata.commit_intent(dt.name, intent, version, commit), False
            written = self.metadata.frontier(dt.name)
            if written is not None and written.pending is None and written.dt_version >= version:
                return written, False
        return self.metadata.commit_intent(dt.name, intent, version, commit), True

    def _recovered(
        self,
        dt: DynamicTable,
        intent: Intent,
        state: State,
        message: str,
        dt_version: Optional[int],
        dt_commit: Optional[str],
        reason: str,
    ) -> None:
        """The history row of a crashed refresh resolved at start."""
        now = utcnow()
        self.metadata.append_history(
            HistoryRow(
                name=dt.name,
                refresh_id=intent.refresh_id,
                data_timestamp=intent.data_timestamp,
                state=state,
                refresh_action=intent.action,
                refresh_trigger=Trigger.RECOVERY,
                refresh_start_time=now,
                refresh_end_time=now,
                reason=reason,
                state_message=message,
                source_versions=versions_of(intent.sources),
                dt_version=dt_version,
                dt_commit=dt_commit,
            )
        )
        logger.info("dyntable: %s %s", dt.name, message)

    def intend(self, dt: DynamicTable, current: Optional[Frontier], intent: Intent) -> None:
        """Record ``intent`` before the DT's commit."""
        self.metadata.record_intent(dt.name, current, intent)

    def withdraw(self, dt: DynamicTable, current: Optional[Frontier]) -> None:
        """Take back the intent of a refresh that failed without committing: the frontier is
        ``current`` again (none, for a DT that had none)."""
        if current is None:
            self.metadata.forget(dt.name)
        else:
            self.metadata.discard_intent(current)

    def commit(self, dt: DynamicTable, intent: Intent, dt_version: int, dt_commit: Optional[str]) -> Frontier:
        """The frontier ``intent`` reaches, with the DT at ``dt_version`` (commit ``dt_commit``)."""
        return self.metadata.commit_intent(dt.name, intent, dt_version, dt_commit)

    def advance(self, current: Frontier, intent: Intent, claim: Optional[Claim] = None) -> Frontier:
        """The frontier of a NO_DATA refresh (the DT untouched): may wait for the batch's end;
        ``claim``: decided without the DT's lease (``MetadataStore.advance``)."""
        return self.metadata.advance(current, intent, claim)

    def forget(self, dt: DynamicTable) -> None:
        self.metadata.forget(dt.name)

    # -- history ---------------------------------------------------------------------------------

    def refreshed(
        self, dt: DynamicTable, refresh_id: str, trigger: Trigger, started: datetime, result: RefreshResult
    ) -> None:
        """The history row of a refresh attempt, and a graph row if its inputs or definition
        changed."""
        if result.reason == "first build":
            trigger = Trigger.CREATION
        self.metadata.append_history(
            HistoryRow(
                name=dt.name,
                refresh_id=refresh_id,
                data_timestamp=result.data_timestamp,
                state=result.state,
                refresh_action=result.action,
                refresh_trigger=trigger,
                refresh_start_time=started,
                refresh_end_time=utcnow(),
                reason=result.reason,
                state_message=result.message or None,
                rows_inserted=result.rows_inserted,
                rows_deleted=result.rows_deleted,
                source_versions=result.source_versions,
                dt_version=result.dt_version,
                dt_commit=result.dt_commit,
                immutable_rows_ignored=result.immutable_rows_ignored,
                verified=result.verified,
                source_rows_read=result.source_reads.rows,
                source_files_read=result.source_reads.files,
            )
        )
        if result.state not in (State.FAILED, State.CANCELLED):
            self._record_graph(dt, result)

    def not_refreshed(
        self, dt: DynamicTable, data_timestamp: datetime, trigger: Trigger, state: State, message: str
    ) -> None:
        """A history row for a refresh that did not run (SKIPPED, UPSTREAM_FAILED)."""
        now = utcnow()
        self.metadata.append_history(
            HistoryRow(
                name=dt.name,
                refresh_id=uuid.uuid4().hex,
                data_timestamp=data_timestamp,
                state=state,
                refresh_action=None,
                refresh_trigger=trigger,
                refresh_start_time=now,
                refresh_end_time=now,
                state_message=message,
            )
        )

    # -- graph: inputs, lag, definition, scheduling state ----------------------------------------

    def _record_graph(self, dt: DynamicTable, result: RefreshResult) -> None:
        """Append a graph row when the DT's inputs, lag or definition changed; a refresh that
        did not fail ends a run of failures."""
        row = self._graph_change(dt, result.source_versions)
        if row is not None:
            self.metadata.append_graph(row)

    def graph_unchanged(self, dt: DynamicTable, source_versions: Mapping[str, int]) -> bool:
        """Whether a refresh that did not fail, reading ``source_versions``, appends no graph row."""
        return self._graph_change(dt, source_versions) is None

    def _graph_change(self, dt: DynamicTable, source_versions: Mapping[str, int]) -> Optional[GraphRow]:
        """The graph row a refresh that did not fail appends, reading ``source_versions``; None
        when the DT's latest one says the same."""
        previous = self.metadata.graph(dt.name).get(dt.name)
        row = replace(
            self._graph_row(dt, previous),
            inputs=sorted(source_versions),
            target_lag=str(dt.config.target_lag),
            effective_target_lag_seconds=dt.config.target_lag.seconds,
            consecutive_failures=0,
            definition_hash=definition_hash(dt.sql, dt.config),
            refresh_mode=dt.config.refresh_mode,
            recorded_at=utcnow(),
            accept_change=False,
        )
        keys = (
            "inputs",
            "target_lag",
            "definition_hash",
            "refresh_mode",
            "consecutive_failures",
            "accept_change",
        )
        if previous is None or any(getattr(previous, k) != getattr(row, k) for k in keys):
            return row
        return None

    def failed(self, dt: DynamicTable) -> int:
        """Count one more consecutive failure (the refresh already wrote its FAILED history row);
        return the count. A refresh that does not fail resets it."""
        row = self._graph_row(dt)
        row = replace(row, consecutive_failures=row.consecutive_failures + 1, recorded_at=utcnow())
        self.metadata.append_graph(row)
        return row.consecutive_failures

    def schedule(self, dt: DynamicTable, state: SchedulingState, accept_change: bool = False) -> None:
        """Suspend or resume ``dt``; resuming also clears its failure count, and may let its next
        refresh exceed the change fuse (docs/ARCHITECTURE.md, "Change fuse")."""
        row = self._graph_row(dt)
        failures = 0 if state is SchedulingState.ACTIVE else row.consecutive_failures
        self.metadata.append_graph(
            replace(
                row,
                scheduling_state=state,
                consecutive_failures=failures,
                recorded_at=utcnow(),
                accept_change=accept_change,
            )
        )

    def change_accepted(self, dt: DynamicTable) -> bool:
        """Whether `dyntable resume --accept-change` lets the next refresh exceed the fuse."""
        row = self.metadata.graph(dt.name).get(dt.name)
        return bool(row is not None and row.accept_change)

    def _graph_row(self, dt: DynamicTable, previous: Optional[GraphRow] = None) -> GraphRow:
        """The DT's latest graph row, or a first one from its model."""
        previous = previous or self.metadata.graph(dt.name).get(dt.name)
        return previous if previous is not None else first_graph_row(dt)


def first_graph_row(dt: DynamicTable) -> GraphRow:
    """The graph row of a DT nothing has recorded yet: its model's settings, active."""
    return GraphRow(
        name=dt.name,
        inputs=[],
        target_lag=str(dt.config.target_lag),
        effective_target_lag_seconds=dt.config.target_lag.seconds,
        scheduling_state=SchedulingState.ACTIVE,
        consecutive_failures=0,
        definition_hash=definition_hash(dt.sql, dt.config),
        refresh_mode=dt.config.refresh_mode,
    )
