"""The names of a refresh's life, as the metadata tables store them, and the request that starts
one (docs/ARCHITECTURE.md).

Each name is a ``str`` enum: it compares equal to, and is stored as, its name.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from typing import FrozenSet, Optional


class _Name(str, Enum):
    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class Action(_Name):
    """What a refresh does."""

    NO_DATA = "NO_DATA"
    """No source changed: decided from the Delta logs alone, the DT is not touched."""
    INCREMENTAL = "INCREMENTAL"
    """The delta query runs and one MERGE (or INSERT) applies it."""
    FULL = "FULL"
    """The query is recomputed and the DT overwritten in one commit."""
    REINITIALIZE = "REINITIALIZE"
    """Like FULL, because the DT cannot be maintained from where it is (first build, changed
    definition, sources whose history cannot be differentiated)."""


class State(_Name):
    """How a refresh attempt ended."""

    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    UPSTREAM_FAILED = "UPSTREAM_FAILED"
    SKIPPED = "SKIPPED"
    CANCELLED = "CANCELLED"


class Trigger(_Name):
    """Who asked for a refresh."""

    CREATION = "CREATION"
    DBT_RUN = "DBT_RUN"
    SCHEDULED = "SCHEDULED"
    MANUAL = "MANUAL"
    RECOVERY = "RECOVERY"


class SourceRead(_Name):
    """At which version a refresh reads a source (docs/ARCHITECTURE.md, "Reading sources")."""

    AS_OF = "AS_OF"
    """A base table at its latest version committed at or before the data timestamp."""
    UPSTREAM = "UPSTREAM"
    """An upstream dynamic table at the version its refresh at the data timestamp produced."""
    INVOCATION = "INVOCATION"
    """A table the same `dbt run`/`dbt build` built, at the version it produced."""
    BOUNDARY = "BOUNDARY"
    """Across a refresh boundary: at its latest version."""


class SchedulingState(_Name):
    """Whether the runner schedules a DT."""

    ACTIVE = "ACTIVE"
    SUSPENDED = "SUSPENDED"


@dataclass(frozen=True)
class RefreshRequest:
    """What a caller asks: a refresh at ``data_timestamp`` (UTC; a naive time is taken as UTC),
    by ``trigger``, rebuilding from scratch with ``full_refresh``, or no refresh under ``empty``."""

    data_timestamp: datetime
    trigger: Trigger
    full_refresh: bool = False
    #: Tables (canonical names) the same `dbt run`/`dbt build` built before this refresh: they are
    #: read at the version the invocation produced, as upstream DTs are.
    built: FrozenSet[str] = frozenset()
    #: dbt's ``--empty``: the model's SQL reads every ref and source as 0 rows, so it is checked and
    #: the DT created empty if missing, never refreshed (docs/ARCHITECTURE.md, "dbt run --empty").
    empty: bool = False

    def __post_init__(self) -> None:
        if self.data_timestamp.tzinfo is None:
            object.__setattr__(self, "data_timestamp", self.data_timestamp.replace(tzinfo=timezone.utc))


#: The longest wait between two attempts of a failing DT (unless its period is longer).
BACKOFF_CAP_MS = 3_600_000


def to_ms(moment: datetime) -> int:
    return int(round(moment.timestamp() * 1000))


def from_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


@dataclass(frozen=True)
class DynamicTableState:
    """What the metadata tables say about a DT's scheduling when a runner tick is decided
    (docs/ARCHITECTURE.md, "Scheduling")."""

    data_timestamp: Optional[datetime] = None
    scheduling_state: SchedulingState = SchedulingState.ACTIVE
    consecutive_failures: int = 0
    #: When the last of those failures was recorded.
    failed_at: Optional[datetime] = None

    def retry_at_ms(self, period_ms: int) -> Optional[int]:
        """The period boundary at which a failing DT is tried again (None: not backing off)."""
        if self.consecutive_failures <= 0 or self.failed_at is None:
            return None
        delay = min(period_ms << (self.consecutive_failures - 1), max(period_ms, BACKOFF_CAP_MS))
        failed_ms = to_ms(self.failed_at)
        return failed_ms - failed_ms % period_ms + delay
