"""Why a log could not answer."""

from __future__ import annotations


class DeltaLogError(RuntimeError):
    """The log could not answer; the message says which table and why."""


class TableNotFound(DeltaLogError):
    """No Delta table (no ``_delta_log`` with commits) at the location."""


class HistoryUnavailable(DeltaLogError):
    """The log entries needed for a version were cleaned up, or the version does not exist."""


class CommitUnreadable(HistoryUnavailable):
    """A commit file is there but does not parse (truncated, corrupt): damage, not a cleanup."""
