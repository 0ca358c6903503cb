"""The metadata tables' rows as typed values (``Frontier``, ``HistoryRow``, ``GraphRow``), and the
intent a refresh records in its frontier while it runs (docs/ARCHITECTURE.md, "Exactly once")."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import Any, ClassVar, Dict, List, Mapping, Optional, Tuple, Type

from dbt.adapters.dyntable.dynamic_table.lifecycle import Action, SchedulingState, SourceRead, State, Trigger


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


#: How much later than the frontier it advances a NO_DATA decided without the DT's lease stamps
#: its own: the least a timestamp column holds, so a row any refresh holding the lease wrote
#: since (stamped with its clock's now) is newer (docs/ARCHITECTURE.md, "Object storage").
LEASE_FREE_STAMP = timedelta(microseconds=1)


def recency(record: Mapping[str, Any]) -> Tuple[datetime, datetime]:
    """How frontier rows of one DT are ordered: its frontier is the latest. Of rows stamped
    alike (two NO_DATA refreshes decided without the lease from one frontier), the later data
    timestamp: a data timestamp never goes back."""
    return (record["updated_at"], record["data_timestamp"])


class _Row:
    """A dataclass stored as one row of a metadata table: JSON-encoded columns (``_JSON``) and
    enum columns (``_ENUMS``) converted both ways, so callers only see typed values."""

    _JSON: ClassVar[Tuple[str, ...]] = ()
    _ENUMS: ClassVar[Mapping[str, Type[Enum]]] = {}

    def to_record(self) -> Dict[str, Any]:
        record: Dict[str, Any] = {}
        for item in fields(self):  # type: ignore[arg-type]
            value = getattr(self, item.name)
            if item.name in self._JSON:
                value = json.dumps(value, sort_keys=True)
            elif isinstance(value, Enum):
                value = value.value
            record[item.name] = value
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Any:
        values: Dict[str, Any] = {}
        for item in fields(cls):  # type: ignore[arg-type]
            if item.name not in record:
                continue
            value = record[item.name]
            if item.name in cls._JSON:
                value = json.loads(value) if value else None
            elif item.name in cls._ENUMS and value is not None:
                value = cls._ENUMS[item.name](value)
            values[item.name] = value
        return cls(**values)


@dataclass(frozen=True)
class SourceVersion:
    """The version of a source a refresh consumed, and what makes it that version: the identity of
    its commit (``""`` when unknown: recorded before identities were kept), and how it was read."""

    version: int
    commit: str
    read: SourceRead = SourceRead.AS_OF

    def to_json(self) -> Dict[str, Any]:
        return {"version": self.version, "commit": self.commit, "read": self.read.value}

    @classmethod
    def from_json(cls, body: Any) -> "SourceVersion":
        if isinstance(body, int):  # a frontier written before identities were kept
            return cls(body, "")
        return cls(int(body["version"]), str(body["commit"]), SourceRead(body["read"]))


Sources = Dict[str, SourceVersion]


def sources_json(sources: Mapping[str, SourceVersion]) -> str:
    return json.dumps({name: source.to_json() for name, source in sources.items()}, sort_keys=True)


def sources_from_json(text: Optional[str]) -> Sources:
    return {name: SourceVersion.from_json(body) for name, body in json.loads(text or "{}").items()}


def versions_of(sources: Mapping[str, SourceVersion]) -> Dict[str, int]:
    return {name: source.version for name, source in sources.items()}


@dataclass(frozen=True)
class Intent:
    """A refresh about to commit: what the frontier becomes if the DT's commit after
    ``base_version`` exists."""

    refresh_id: str
    data_timestamp: datetime
    sources: Sources
    base_version: int
    definition_hash: str
    refresh_mode: str
    definition: str
    action: Action
    #: The views the query reads: name → fingerprint of its definition (None: not recorded).
    views: Optional[Dict[str, str]] = None
    #: The :class:`WriterMark` of the process whose batch writes the frontier this intent reaches
    #: (None: written at once).
    writer: Optional[str] = None

    def to_json(self) -> str:
        body: Dict[str, Any] = dict(self.__dict__)
        if self.writer is None:
            del body["writer"]  # as intents were written before there were marks
        body["data_timestamp"] = self.data_timestamp.isoformat()
        body["action"] = self.action.value
        body["sources"] = json.loads(sources_json(self.sources))
        return json.dumps(body, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Intent":
        body = json.loads(text)
        body["data_timestamp"] = datetime.fromisoformat(body["data_timestamp"])
        body["action"] = Action(body["action"])
        # Intents written before identities were kept name versions only.
        named = body.pop("sources", None) or body.pop("source_versions", {})
        body["sources"] = {name: SourceVersion.from_json(value) for name, value in named.items()}
        return cls(**body)


@dataclass(frozen=True)
class Frontier(_Row):
    """How far a dynamic table has consumed its sources, and the DT version (and commit) that
    produced; while a refresh runs, its ``pending`` intent (docs/ARCHITECTURE.md, "Exactly once")."""

    name: str
    data_timestamp: datetime
    sources: Sources
    dt_version: int
    definition_hash: str
    refresh_mode: str
    definition: str
    pending: Optional[Intent] = None
    dt_commit: Optional[str] = None
    updated_at: Optional[datetime] = field(default=None, compare=False)
    #: The views the query read: name → fingerprint of its definition (None: recorded before
    #: views were, by an older version).
    views: Optional[Dict[str, str]] = None

    @property
    def source_versions(self) -> Dict[str, int]:
        return versions_of(self.sources)

    def newer_than(self, other: "Frontier") -> bool:
        """Whether this row supersedes ``other`` (:func:`recency`); both stamped."""
        assert self.updated_at is not None and other.updated_at is not None
        return (self.updated_at, self.data_timestamp) > (other.updated_at, other.data_timestamp)

    def to_record(self) -> Dict[str, Any]:
        record = super().to_record()
        record["sources"] = sources_json(self.sources)
        record["source_versions"] = json.dumps(self.source_versions, sort_keys=True)
        record["pending"] = self.pending.to_json() if self.pending else None
        record["views"] = json.dumps(self.views, sort_keys=True) if self.views is not None else None
        record["updated_at"] = self.updated_at or utcnow()
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> "Frontier":
        pending, sources = record.get("pending"), record.get("sources") or record.get("source_versions")
        frontier: Frontier = super().from_record({**record, "pending": None, "sources": None})
        return replace(
            frontier,
            sources=sources_from_json(sources),
            definition=frontier.definition or "",
            pending=Intent.from_json(pending) if pending else None,
            views=json.loads(record["views"]) if record.get("views") else None,
        )

    def committing(self, intent: Intent, dt_version: int, dt_commit: Optional[str]) -> "Frontier":
        """The frontier once ``intent`` committed as DT version ``dt_version``."""
        return Frontier(
            name=self.name,
            data_timestamp=intent.data_timestamp,
            sources=intent.sources,
            dt_version=dt_version,
            definition_hash=intent.definition_hash,
            refresh_mode=intent.refresh_mode,
            definition=intent.definition,
            dt_commit=dt_commit,
            views=intent.views,
        )


@dataclass(frozen=True)
class HistoryRow(_Row):
    """One refresh attempt (``dynamic_table_refresh_history``)."""

    _JSON: ClassVar[Tuple[str, ...]] = ("source_versions",)
    _ENUMS: ClassVar[Mapping[str, Type[Enum]]] = {
        "state": State,
        "refresh_action": Action,
        "refresh_trigger": Trigger,
    }

    name: str
    refresh_id: str
    data_timestamp: Optional[datetime]
    state: State
    refresh_action: Optional[Action]
    refresh_trigger: Trigger
    refresh_start_time: datetime
    refresh_end_time: datetime
    reason: Optional[str] = None
    state_message: Optional[str] = None
    rows_inserted: int = 0
    rows_deleted: int = 0
    source_versions: Dict[str, int] = field(default_factory=dict)
    dt_version: Optional[int] = None
    #: The identity of the DT's commit at ``dt_version`` (docs/ARCHITECTURE.md, "Consistent reads").
    dt_commit: Optional[str] = None
    #: Row changes left out for being in the immutable region (docs/ARCHITECTURE.md, "Immutable rows").
    immutable_rows_ignored: int = 0
    #: How the refreshed DT compared with its query: ``equal (...)``, ``MISMATCH (...): ...``,
    #: ``not verified: ...``; None when not checked (docs/ARCHITECTURE.md, "Verifying").
    verified: Optional[str] = None
    #: Rows and data files of its sources the refresh read, by the Delta logs' statistics; None
    #: in rows written before they were recorded (docs/ARCHITECTURE.md, "Rewritten inputs").
    source_rows_read: Optional[int] = None
    source_files_read: Optional[int] = None


@dataclass(frozen=True)
class GraphRow(_Row):
    """A change of a DT's inputs, lag, definition or scheduling state
    (``dynamic_table_graph_history``)."""

    _JSON: ClassVar[Tuple[str, ...]] = ("inputs",)
    _ENUMS: ClassVar[Mapping[str, Type[Enum]]] = {"scheduling_state": SchedulingState}

    name: str
    inputs: List[str]
    target_lag: str
    effective_target_lag_seconds: Optional[int]
    scheduling_state: SchedulingState
    consecutive_failures: int
    definition_hash: str
    refresh_mode: str
    recorded_at: datetime = field(default_factory=utcnow)
    #: `dyntable resume --accept-change`: the next refresh may exceed the change fuse.
    accept_change: Optional[bool] = False
