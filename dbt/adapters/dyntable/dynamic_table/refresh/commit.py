"""The exactly-once commit of a refresh that writes the DT, and the results of one that does not
(docs/ARCHITECTURE.md, "Exactly once"): the intent, the DT's one commit, then the frontier it
reached.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable, Optional, Tuple

from dbt.adapters.dyntable.delta_log import DeltaLog
from dbt.adapters.dyntable.dynamic_table.claims import Claim
from dbt.adapters.dyntable.dynamic_table.failpoints import failpoint
from dbt.adapters.dyntable.dynamic_table.lifecycle import Action, State
from dbt.adapters.dyntable.dynamic_table.metadata import Frontier, Intent
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.refresh.carried import carrying
from dbt.adapters.dyntable.dynamic_table.refresh.facts import Decision, Definition, Observation
from dbt.adapters.dyntable.dynamic_table.refresh.record import Recorder, RefreshResult

#: A write of the DT's one commit, recording the ``userMetadata`` it is given (None: no intent
#: to carry); returns the rows it inserted and deleted.
Write = Callable[[Optional[str]], Tuple[int, int]]


@dataclass(frozen=True)
class Refresh:
    """One refresh in flight: the DT, what it maintains, and the facts its decision rests on."""

    dt: DynamicTable
    refresh_id: str
    definition: Definition
    frontier: Optional[Frontier]
    observed: Observation
    decision: Decision
    #: Whether the change fuse checks this refresh (docs/ARCHITECTURE.md, "Change fuse").
    guarded: bool = False
    #: Decided without the DT's lease (docs/ARCHITECTURE.md, "Object storage").
    without_lease: bool = False

    def intent(self, base_version: int, writer: Optional[str] = None) -> Intent:
        assert self.decision.action is not None
        return Intent(
            self.refresh_id,
            self.observed.data_timestamp,
            self.observed.consumed,
            base_version,
            self.definition.hash,
            self.dt.config.refresh_mode,
            self.definition.sql,
            self.decision.action,
            self.observed.view_fingerprints,
            writer,
        )

    def result(self, reached: Frontier, inserted: int = 0, deleted: int = 0) -> RefreshResult:
        """The result of a refresh that left the DT where frontier ``reached`` says; what it read
        of its sources so far: the rewrites it measured."""
        return RefreshResult(
            self.dt.name,
            self.decision.action,
            self.decision.state,
            self.decision.reason,
            self.observed.data_timestamp,
            inserted,
            deleted,
            reached.dt_version,
            source_versions=self.observed.versions,
            warnings=list(self.definition.warnings),
            dt_commit=reached.dt_commit,
            source_reads=self.observed.measured_reads,
        )


def commit(
    recorder: Recorder,
    refresh: Refresh,
    dt_log: DeltaLog,
    current: Optional[Frontier],
    write: Write,
    carries_intent: bool = False,
) -> RefreshResult:
    """The exactly-once commit: the intent, the DT's one commit by ``write``, then the frontier
    it reached. The intent goes in the DT's commit where ``carries_intent`` says that commit can
    carry it; else in the frontier table first."""
    intent = refresh.intent(dt_log.latest_version(), recorder.metadata.writer())
    user_metadata = carrying(intent) if carries_intent else None
    if user_metadata is None:
        recorder.intend(refresh.dt, current, intent)
    failpoint("after_intent")
    failpoint("during_apply")
    try:
        inserted, deleted = write(user_metadata)
    except Exception:
        # A statement that failed (a check inside it, or the engine) committed nothing:
        # withdraw the intent rather than leave it for the next refresh to discard.
        # The statement's own error is the one to report, whatever the withdrawal meets.
        with contextlib.suppress(Exception):
            if user_metadata is None and dt_log.latest_version() == intent.base_version:
                recorder.withdraw(refresh.dt, current)
        raise
    failpoint("after_apply")
    dt_version = dt_log.latest_version()
    reached = recorder.commit(refresh.dt, intent, dt_version, dt_log.commit_id(dt_version))
    return refresh.result(reached, inserted, deleted)


def unchanged(recorder: Recorder, refresh: Refresh, dt_log: DeltaLog) -> RefreshResult:
    """The result of a refresh that found nothing to write: the frontier moves to the
    sources' versions, the DT stays at its version."""
    version = dt_log.latest_version()
    reached = recorder.commit(refresh.dt, refresh.intent(version), version, dt_log.commit_id(version))
    return refresh.result(reached)


def no_data(recorder: Recorder, refresh: Refresh) -> RefreshResult:
    """The result of a NO_DATA refresh: SKIPPED where only the DT's lock knows how far it got,
    else the frontier advanced to the sources' versions."""
    if refresh.decision.state is State.SKIPPED:
        frontier = refresh.frontier  # None: only the DT's lock knows how far it got
        return RefreshResult(
            refresh.dt.name,
            Action.NO_DATA,
            State.SKIPPED,
            refresh.decision.reason,
            frontier.data_timestamp if frontier else refresh.observed.data_timestamp,
            dt_version=frontier.dt_version if frontier else None,
            source_versions=frontier.source_versions if frontier else {},
            dt_commit=frontier.dt_commit if frontier else None,
        )
    assert refresh.frontier is not None
    frontier = refresh.frontier  # its DT version and commit were checked by observe()
    recorder.advance(frontier, refresh.intent(frontier.dt_version), _claim(refresh))
    return refresh.result(frontier)


def _claim(refresh: Refresh) -> Optional[Claim]:
    """What a NO_DATA decided without the DT's lease claims, for its batch's end to check."""
    dt_log, frontier = refresh.observed.dt_log, refresh.frontier
    if not refresh.without_lease or dt_log is None or frontier is None:
        return None
    return Claim(
        refresh.dt.name,
        refresh.refresh_id,
        refresh.observed.data_timestamp,
        frontier.data_timestamp,
        dt_log.latest_version(),
        str(dt_log.location),
    )
