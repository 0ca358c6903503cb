"""The listing one :class:`~.log.DeltaLog` answers from: held for a refresh, reused between this
process's writes on an object store, else taken anew; and the re-creation of the table it shows."""

from __future__ import annotations

import threading
from typing import Callable, Optional, Tuple

from dbt.adapters.dyntable.delta_log.errors import TableNotFound
from dbt.adapters.dyntable.delta_log.listing import Listing, list_local
from dbt.adapters.dyntable.delta_log.object_listing import list_objects, list_objects_from
from dbt.adapters.dyntable.delta_log.protocol import LOG_DIR
from dbt.adapters.dyntable.delta_log.table_files import TableFiles

#: Writes this process made to any table, counted: an object store's listing held by a DeltaLog
#: answers its next question while the count is unchanged (each would be a request), and is taken
#: again after a write, which may have been to its table (docs/ARCHITECTURE.md, "Object storage").
_writes = [0]
_writes_lock = threading.Lock()


def note_write() -> None:
    """This process wrote (a statement of its engine, or deltalake): listings held are retaken."""
    with _writes_lock:
        _writes[0] += 1


class CurrentListing:
    """The listing of one table's log that one reader's questions are answered from."""

    def __init__(self, files: TableFiles, since: Optional[int], forget: Callable[[], None]) -> None:
        """``since``: the version the caller will ask about first, where an object store's log is
        listed from when this process has not listed it yet. ``forget``: drops what the reader
        keeps by version, called when a listing shows the table re-created (:meth:`get`)."""
        self._files = files
        self._since = since
        self._forget = forget
        #: An object store's listing and the write count it was taken at (see ``note_write``).
        self._answered: Optional[Tuple[int, Listing]] = None
        self._held: Optional[Listing] = None
        self._seen: Optional[Listing] = None

    def get(self) -> Listing:
        """The held listing, else the log as listed now (:meth:`_list`)."""
        if self._held is not None:
            return self._held
        listing = self._list()
        seen, self._seen = self._seen, listing
        if seen is not None and seen is not listing and seen.last_commit is not None:
            # The latest commit listed before is gone or written anew: the table was re-created
            # in its folder (a partitioned DT replaced on the embedded engine, a source dropped
            # and written again), and this reader's versions name other commits now.
            last = seen.last_commit
            if listing.commit_mtimes_ms.get(last) != seen.commit_mtimes_ms[last] or listing.tags.get(
                last
            ) != seen.tags.get(last):
                self._forget()
        return listing

    def now(self) -> Listing:
        """The log as it is now, whatever this reader holds or took last."""
        return list_objects(self._files, self._since) if self._files.remote else list_local(self._files)

    def hold(self) -> None:
        """Answer from one listing, taken now, from now on (``DeltaLog.hold_listing``)."""
        self._held = self.get()

    def listed_from(self, version: Optional[int]) -> Listing:
        """An object store's log listed from ``version`` on (None: whole), answered from since:
        a question about a version before the listing's first."""
        listing = list_objects_from(self._files, version)
        if self._held is not None:
            self._held = listing
        self._seen = listing
        self._answered = (_writes[0], listing)
        return listing

    def exists(self) -> bool:
        return self.get().latest is not None

    def latest_version(self) -> int:
        """The newest committed version, from one listing of ``_delta_log``."""
        latest = self.get().latest
        if latest is None:
            raise TableNotFound(f"No Delta table at {self._files.location} (no commits in {LOG_DIR}).")
        return latest

    def _list(self) -> Listing:
        if self._files.remote:
            # Questions asked of one reader (one refresh's) between this process's writes are
            # answered from one listing; another process's commit meanwhile is as one landing
            # just after it.
            writes = _writes[0]
            if self._answered is not None and self._answered[0] == writes:
                return self._answered[1]
            listing = list_objects(self._files, self._since)
            self._answered = (writes, listing)
            return listing
        return list_local(self._files)
