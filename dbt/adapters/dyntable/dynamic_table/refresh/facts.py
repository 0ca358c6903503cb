"""The facts the refresh stages share (docs/ARCHITECTURE.md, "The path of one refresh"): the
definition a refresh maintains, each source as the logs show it, what the refresh observed at its
data timestamp, and the decision taken on them. Data only: the stages that produce and read these
import this module, never each other for them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Dict, Mapping, Optional, Sequence, Tuple

import pyarrow as pa
import pyarrow.compute as pc

from dbt.adapters.dyntable.changes import SourceReads, inserts_only
from dbt.adapters.dyntable.delta_log import DeltaLog, Interval, IntervalKind
from dbt.adapters.dyntable.dynamic_table.lifecycle import Action, SourceRead, State
from dbt.adapters.dyntable.dynamic_table.metadata import Sources, SourceVersion
from dbt.adapters.dyntable.dynamic_table.refresh.planned_query import PlannedQuery
from dbt.adapters.dyntable.vocabulary import WEIGHT, fingerprint

#: The most rows of a rewritten input's net change a refresh holds in this process
#: (docs/ARCHITECTURE.md, "Rewritten inputs"); a larger one stays in the engine.
NET_CHANGE_MAX_ROWS = 200_000


@dataclass(frozen=True)
class NetChange:
    """A rewritten source's change over the refresh's interval as a multiset: its columns plus
    the weight, one row per row instance that appeared (+1) or went away (-1), the copies the
    rewrite made cancelled. ``rows`` is None when it holds more than :data:`NET_CHANGE_MAX_ROWS`."""

    rows: Optional[pa.Table]
    #: What measuring it read of the source: the rewritten files of both versions.
    read: SourceReads = SourceReads()
    #: What changed only in columns the DT's query does not read, left out of ``rows``, in
    #: words (``net_change.read_through``).
    unread: Optional[str] = None

    @property
    def empty(self) -> bool:
        return self.rows is not None and self.rows.num_rows == 0

    @property
    def inserts_only(self) -> bool:
        return self.rows is not None and inserts_only(self.rows)

    @property
    def row_count(self) -> Optional[int]:
        return None if self.rows is None else self.rows.num_rows

    @property
    def size_bytes(self) -> int:
        return 0 if self.rows is None else int(self.rows.nbytes)

    def describe(self) -> str:
        """What the change is, in words for a refresh's reason."""
        if self.rows is None:
            return f"more than {NET_CHANGE_MAX_ROWS:,} rows changed"
        if self.empty:
            return f"{self.unread}, in columns it does not read" if self.unread else "the same rows"
        added = int(pc.sum(pc.greater(self.rows.column(WEIGHT), 0)).as_py() or 0)
        return f"{added:,} row(s) added and {self.rows.num_rows - added:,} removed"


@dataclass(frozen=True)
class Definition:
    """The definition a refresh maintains, and what is known before its sources are read."""

    sql: str
    hash: str
    rebuild_reason: Optional[str] = None
    warnings: Tuple[str, ...] = ()


@dataclass(frozen=True)
class SourceState:
    """A source as a refresh finds it: the version consumed at the frontier (``start``, None when
    new to the DT or rebuilding), the version read at T (``end``) with its commit's identity and
    how it was read, why the consumed version is no longer this table's history (``lost``), the
    change between the two (``interval``, read only when they differ) and its size at ``end``."""

    name: str
    log: DeltaLog
    start: Optional[int]
    end: int
    commit: str
    read: SourceRead = SourceRead.AS_OF
    lost: Optional[str] = None
    interval: Optional[Interval] = None
    size_bytes: int = 0
    #: Its rows at ``end``, from the log's statistics (None without them; read with the size).
    row_count: Optional[int] = None
    #: Its net change, where the interval rewrote files (``net_change.measure``).
    net: Optional[NetChange] = None
    #: Why newer commits than ``end`` wait: the next one is stamped ahead of this machine's clock.
    waiting: Optional[str] = None

    @property
    def reads_no_change(self) -> bool:
        """Its change holds no row: no interval, one of compactions only, or a rewrite of the
        same rows (docs/ARCHITECTURE.md, "Rewritten inputs")."""
        if self.net is not None and self.net.empty:
            return True
        interval = self.interval
        return interval is None or (interval.differentiable and interval.kind is IntervalKind.EMPTY)

    @property
    def unchanged(self) -> bool:
        """No row of it changed since the version the frontier consumed."""
        return self.lost is None and self.start is not None and self.reads_no_change

    @property
    def changed_rows(self) -> Optional[int]:
        """The rows its change holds: the net change's where measured, else the writers' count."""
        if self.net is not None and self.net.row_count is not None:
            return self.net.row_count
        return self.interval.changed_rows if self.interval is not None else None


@dataclass(frozen=True)
class Observation:
    """What the logs say at T: every source's state, T itself (moved back to the data timestamp
    of an upstream DT that has not reached it: delayed view semantics), and why the DT's own log
    does not hold what its frontier recorded (``dt_changed``)."""

    sources: Sequence[SourceState]
    data_timestamp: datetime
    #: Definitions of the views the query reads, transitively (``schema.view``).
    views: Mapping[str, str] = field(default_factory=dict)
    dt_changed: Optional[str] = None
    #: The DT's size and rows (read where AUTO estimates costs; rows None without statistics).
    dt_size_bytes: int = 0
    dt_rows: Optional[int] = None
    #: The clock function the query reads, if any: it is recomputed at each new T (``clock.py``).
    clock: Optional[str] = None
    #: The upstream DTs whose data timestamp held T back from the one requested.
    held_by: Tuple[str, ...] = ()
    #: The DT's own log as read (None: no table).
    dt_log: Optional[DeltaLog] = field(default=None, compare=False)
    #: The partitions of the window whose partition columns the DT holds, counted in the DT where
    #: AUTO weighs a change to the window's input (``partitions.measured``; None: not counted).
    window_partitions: Optional[int] = None

    @property
    def versions(self) -> Dict[str, int]:
        return {s.name: s.end for s in self.sources}

    @property
    def consumed(self) -> Sources:
        """What a refresh at this observation consumes, as the frontier records it."""
        return {s.name: SourceVersion(s.end, s.commit, s.read) for s in self.sources}

    @property
    def waiting(self) -> Tuple[str, ...]:
        """Why sources' newer commits wait for a later data timestamp (clock skew)."""
        return tuple(s.waiting for s in self.sources if s.waiting)

    @property
    def measured_reads(self) -> SourceReads:
        """What measuring the net changes of rewritten sources read of them."""
        total = SourceReads()
        for source in self.sources:
            total += source.net.read if source.net is not None else SourceReads()
        return total

    @property
    def view_fingerprints(self) -> Dict[str, str]:
        """The views the query reads, as the frontier records them: name → fingerprint."""
        return {name: fingerprint(" ".join(text.split())) for name, text in self.views.items()}


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
