"""The change fuse (docs/ARCHITECTURE.md, "Change fuse"): a refresh that would change more of a
dynamic table than its model allows (``max_change_ratio``, ``max_change_rows``) is not applied, and
the DT is suspended until someone looks: an upstream mistake (a truncated source, a bad reload)
must not wipe a table that dashboards read.

It guards the refreshes the data causes, not those a person asked for: a first build, a
``--full-refresh``, a changed definition or refresh mode rebuild without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from dbt.adapters.dyntable.dynamic_table.lifecycle import Action
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable, RefreshError


@dataclass(frozen=True)
class Change:
    """What a refresh would do to a DT: its rows before, and the rows it inserts and deletes
    (for a recompute, the net difference: which rows it replaces is not known before writing)."""

    held: int
    inserted: int
    deleted: int

    @property
    def rows(self) -> int:
        return self.inserted + self.deleted

    @property
    def ratio(self) -> Optional[float]:
        """The share of the DT's rows it changes; None for an empty DT (filling it wipes nothing)."""
        return self.rows / self.held if self.held else None


class ChangeFuseTripped(RefreshError):
    """A refresh changes more than the model allows: not applied, the DT suspended."""

    def __init__(self, dt: DynamicTable, action: Optional[Action], change: Change, limit: str) -> None:
        self.action = action
        self.reason = f"change fuse: {limit}"
        share = f" ({change.ratio:.0%} of its rows)" if change.ratio is not None else ""
        super().__init__(
            f"this refresh ({action}) would insert "
            f"{change.inserted:,} and delete {change.deleted:,} of its {change.held:,} rows{share}, "
            f"over its {limit}: not applied, and the table is suspended. Check its sources; to "
            f"apply the change, run `dyntable resume {dt.model} --accept-change` and refresh it, "
            f"or rebuild it with `dbt run --full-refresh --select {dt.model}`."
        )


def exceeded(dt: DynamicTable, change: Change) -> Optional[str]:
    """The limit ``change`` exceeds, in words, or None."""
    config = dt.config
    if config.max_change_rows is not None and change.rows > config.max_change_rows:
        return f"max_change_rows of {config.max_change_rows:,}"
    ratio = change.ratio
    if config.max_change_ratio is not None and ratio is not None and ratio > config.max_change_ratio:
        return f"max_change_ratio of {config.max_change_ratio:g}"
    return None


def is_guarded(dt: DynamicTable) -> bool:
    return dt.config.max_change_ratio is not None or dt.config.max_change_rows is not None


def check(dt: DynamicTable, action: Optional[Action], change: Change) -> None:
    """Raise :class:`ChangeFuseTripped` when ``change`` exceeds the model's limits."""
    limit = exceeded(dt, change)
    if limit is not None:
        raise ChangeFuseTripped(dt, action, change, limit)
