"""Consistent reads across dynamic tables: the latest data timestamp several DTs all hold, and the
Delta version of each that holds it (docs/ARCHITECTURE.md, "Consistent reads").

A DT's version v *holds* data timestamp T when a refresh at T left the DT at v: it then equals its
query over the sources as of T. Refreshes of one dbt invocation or one runner tick share T, and the
runner's periods (48·2ⁿ seconds) make the ticks of slower DTs ticks of faster ones too, so DTs
refreshed on a schedule keep meeting at common timestamps. Which versions hold which timestamps is
in the refresh history (successful refreshes, NO_DATA ones included) and the frontiers.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Dict, Optional, Sequence

from dbt.adapters.dyntable.delta_log import DeltaLog, DeltaLogError
from dbt.adapters.dyntable.dynamic_table.lifecycle import State
from dbt.adapters.dyntable.dynamic_table.metadata import MetadataStore
from dbt.adapters.dyntable.engines.base import Engine


@dataclass(frozen=True)
class Held:
    """A DT version that holds a data timestamp, and the identity of its commit."""

    version: int
    commit: str


@dataclass(frozen=True)
class CommonSnapshot:
    """The latest data timestamp every DT asked for holds, and the version of each holding it."""

    data_timestamp: datetime
    versions: Dict[str, int]


class NoCommonSnapshot(ValueError):
    """The DTs never held one data timestamp together (or those versions are gone)."""


def held_versions(metadata: MetadataStore, name: str) -> Dict[datetime, Held]:
    """Every data timestamp DT ``name`` held, and the version that held it."""
    held: Dict[datetime, Held] = {}
    for row in metadata.history(name):
        at = row.data_timestamp
        if row.state is State.SUCCEEDED and at is not None and row.dt_version is not None and row.dt_commit:
            held[at] = Held(row.dt_version, row.dt_commit)
    frontier = metadata.frontier(name)
    if frontier is not None and frontier.pending is None and frontier.dt_commit:
        # A NO_DATA advance may be in the frontier before its history row is written.
        held.setdefault(frontier.data_timestamp, Held(frontier.dt_version, frontier.dt_commit))
    return held


def common_snapshot(engine: Engine, metadata: MetadataStore, names: Sequence[str]) -> CommonSnapshot:
    """The latest data timestamp all of ``names`` (``schema.table``) hold, with each DT's version.

    A version counts while the DT's log still has it as the commit that refresh made (a table
    dropped and re-created, or restored, reuses version numbers for other commits)."""
    held = {name: held_versions(metadata, name) for name in names}
    never = sorted(name for name, versions in held.items() if not versions)
    if never:
        raise NoCommonSnapshot(f"{', '.join(never)} never refreshed successfully: refresh it first.")
    logs = {name: engine.delta_log(name) for name in names}
    common = set.intersection(*(set(versions) for versions in held.values()))
    for data_timestamp in sorted(common, reverse=True):
        versions = {name: held[name][data_timestamp] for name in names}
        if all(_still_there(logs[name], held_at) for name, held_at in versions.items()):
            return CommonSnapshot(data_timestamp, {name: h.version for name, h in versions.items()})
    latest = ", ".join(f"{name} at {max(versions):%Y-%m-%d %H:%M:%S}" for name, versions in held.items())
    raise NoCommonSnapshot(
        f"{', '.join(names)} hold no data timestamp in common (latest: {latest}). Refresh them "
        "together: one `dbt run` selecting them, or `dyntable refresh` of a DT reading them all."
    )


def _still_there(log: Optional[DeltaLog], held: Held) -> bool:
    if log is None:
        return False
    try:
        return log.commit_id(held.version) == held.commit
    except DeltaLogError:
        return False  # the version's commit is gone (log cleaned up, table re-created shorter)
