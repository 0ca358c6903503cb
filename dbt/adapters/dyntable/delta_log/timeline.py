"""A table's versions in time: when each was committed, and which was current at a time."""

from __future__ import annotations

import bisect
from typing import List, Optional, Tuple

from dbt.adapters.dyntable.delta_log.commits import Commits
from dbt.adapters.dyntable.delta_log.current_listing import CurrentListing
from dbt.adapters.dyntable.delta_log.errors import HistoryUnavailable, TableNotFound
from dbt.adapters.dyntable.delta_log.listing import Listing
from dbt.adapters.dyntable.delta_log.protocol import LOG_DIR


class Timeline:
    """Commit timestamps of one table's loadable versions, from its listing and, where the table
    records them, its commits' in-commit timestamps."""

    def __init__(self, location: str, listing: CurrentListing, commits: Commits) -> None:
        self._location = location
        self._listing = listing
        self._commits = commits

    def commit_timestamp(self, version: int) -> int:
        """When ``version`` was committed, in epoch milliseconds.

        Per the Delta protocol: the commit's in-commit timestamp where the table records one,
        else the commit file's modification time, made strictly increasing over versions as
        Delta Spark does, so that "latest version at T" is well defined.
        """
        listing = self._listing.get()
        if listing.complete_from is not None and version < listing.complete_from:
            listing = self._listing.listed_from(version)
        versions, stamps = self._stamps(listing)
        position = bisect.bisect_left(versions, version)
        if position == len(versions) or versions[position] != version:
            raise HistoryUnavailable(
                f"Version {version} of {self._location} has no loadable commit in {LOG_DIR} "
                f"(versions {versions[0] if versions else '-'}..{versions[-1] if versions else '-'} remain)."
            )
        return stamps[position]

    def version_at(self, timestamp_ms: int) -> Optional[int]:
        """The latest version committed at or before ``timestamp_ms``; None if the table did not
        exist yet. Raises :class:`HistoryUnavailable` if the versions around T were cleaned up.

        A commit being written while T passes can still land with a timestamp at or before T;
        callers pick a T slightly in the past before relying on the answer being final.
        """
        listing = self._listing.get()
        if listing.latest is None:
            raise TableNotFound(f"No Delta table at {self._location} (no commits in {LOG_DIR}).")
        versions, stamps = self._stamps(listing)
        position = bisect.bisect_right(stamps, timestamp_ms)
        if position == 0 and listing.complete_from is not None:
            # Listed from a later version on than T needs: list the whole log.
            versions, stamps = self._stamps(self._listing.listed_from(None))
            position = bisect.bisect_right(stamps, timestamp_ms)
        if position == 0:
            if versions and versions[0] == 0:
                return None
            raise HistoryUnavailable(
                f"{self._location}: the log before version {versions[0] if versions else '?'} was "
                f"cleaned up, so the version current at {timestamp_ms} ms is unknown."
            )
        return versions[position - 1]

    def _stamps(self, listing: Listing) -> Tuple[List[int], List[int]]:
        """Loadable versions and their monotonised commit timestamps, ascending."""
        earliest = listing.earliest_loadable
        versions = sorted(v for v in listing.commit_mtimes_ms if earliest is not None and v >= earliest)
        use_ict = bool(versions) and self._commits.in_commit_timestamp(versions[-1]) is not None
        stamps: List[int] = []
        for version in versions:
            raw = listing.commit_mtimes_ms[version]
            if use_ict:
                raw = self._commits.in_commit_timestamp(version) or raw
            stamps.append(max(raw, stamps[-1] + 1) if stamps else raw)
        return versions, stamps
