"""One refresh of a dynamic table at a time, across processes (one compaction of a metadata table
too: :class:`ExclusiveLock` is the bare lock); and which processes still have frontiers to write.

An exclusive `flock` on ``<root>/<name>.lock``; the holder writes who it is into the file so a
second runner can say what holds the lock, and the latest data timestamp a refresh reached under
it, which the next holder reads: a refresh whose frontier waits for its batch's end has not
written it yet, and the DT's data timestamp must never go back (docs/ARCHITECTURE.md, "Exactly
once"). The OS releases the lock when a process dies, so a crashed refresh never leaves a DT
locked. A :class:`WriterMark` is the same kind of lock, held by
a process while frontiers its refreshes reached wait for its batch's end (docs/ARCHITECTURE.md,
"Exactly once"). In a warehouse on an object store, where there is no file to lock, both are
lease objects (:mod:`.leases`).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Dict, Optional, Type, Union

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.dynamic_table.claims import claimed
from dbt.adapters.dyntable.dynamic_table.leases import Lease, describe, holder_gone

#: The folder of the locks, under the metadata schema's folder.
LOCKS_DIR = ".locks"
#: The folder of the writer marks, under the locks' folder.
WRITERS_DIR = "writers"
#: How often a refresh waiting for another's lock tries it again.
LOCK_POLL_SECONDS = 0.05
#: Conditional puts tried before giving up recording what a refresh reached in an object store.
RECORD_ATTEMPTS = 5


class LockHeld(RuntimeError):
    """Another process holds the lock."""

    def __init__(self, name: str, holder: str, message: Optional[str] = None) -> None:
        super().__init__(message or f"{name} is held by {holder}.")
        self.name = name
        self.holder = holder


class RefreshLocked(LockHeld):
    """Another process is refreshing this dynamic table."""

    def __init__(self, name: str, holder: str) -> None:
        super().__init__(name, holder, f"it is being refreshed by {holder}; try again when it ends.")


class ExclusiveLock:
    """``<root>/<name>.lock``, held by one process at a time: a ``flock`` on a local disk, a lease
    object in an object store. ``wait_seconds``: how long to wait for another holder to release
    it before :class:`LockHeld` (0: not at all)."""

    def __init__(self, root: Union[str, Path], name: str, wait_seconds: float = 0.0) -> None:
        self.name = name
        self.path = Path(root) / f"{name}.lock"
        self.wait_seconds = wait_seconds
        self._handle: Optional[IO[str]] = None
        found = storage.of(str(root))
        self._objects = found if isinstance(found, storage.ObjectStorage) else None
        self._lease = Lease(self._objects, f"{str(root).rstrip('/')}/{name}.lock") if self._objects else None

    def held_by(self, holder: str) -> LockHeld:
        return LockHeld(self.name, holder)

    def acquire(self) -> "ExclusiveLock":
        deadline = time.monotonic() + self.wait_seconds
        if self._lease is not None:
            while True:
                found = self._lease.acquire()
                if found is None:
                    break
                if time.monotonic() >= deadline:
                    raise self.held_by(describe(found))
                time.sleep(LOCK_POLL_SECONDS)
            self.taken(None)
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+")
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() < deadline:
                    time.sleep(LOCK_POLL_SECONDS)
                    continue
                handle.seek(0)
                holder = describe_holder(handle.read())
                handle.close()
                raise self.held_by(holder) from None
        handle.seek(0)
        previous = handle.read()
        self._handle = handle
        self.taken(previous)
        self._write()
        return self

    def taken(self, previous: Optional[str]) -> None:
        """Just taken; ``previous``: what the last holder wrote in the lock file (None: a lease)."""

    def details(self) -> Dict[str, Any]:
        """What the holder writes in the lock file beside who it is."""
        return {}

    def _write(self) -> None:
        handle = self._handle
        if handle is None:
            return
        record: Dict[str, Any] = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": " ".join(os.path.basename(a) for a in sys.argv[:2]),
            "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **self.details(),
        }
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(record))
        handle.flush()

    def release(self) -> None:
        if self._lease is not None:
            self._lease.release()
            return
        handle, self._handle = self._handle, None
        if handle is not None:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            handle.close()

    def __enter__(self) -> "ExclusiveLock":
        return self.acquire()

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.release()


class RefreshLock(ExclusiveLock):
    """The lock of one DT's refreshes (:class:`RefreshLocked` when another process holds it), with
    the latest data timestamp a refresh reached under it."""

    def __init__(self, root: Union[str, Path], name: str, wait_seconds: float = 0.0) -> None:
        super().__init__(root, name, wait_seconds)
        #: The latest data timestamp a refresh of the DT reached, as its holders recorded it.
        self.reached: Optional[datetime] = None
        #: In an object store, where the lease object goes with its holder, what was reached is
        #: kept in an object of its own.
        self._reached_at = f"{str(root).rstrip('/')}/{name}.reached"

    def held_by(self, holder: str) -> LockHeld:
        return RefreshLocked(self.name, holder)

    def acquire(self) -> "RefreshLock":
        super().acquire()
        return self

    def __enter__(self) -> "RefreshLock":
        return self.acquire()

    def taken(self, previous: Optional[str]) -> None:
        if previous is not None:
            self.reached = _reached(previous)
            return
        assert self._objects is not None and self._lease is not None
        recorded = self._objects.read(self._reached_at)
        self.reached = _reached(recorded.decode()) if recorded else None
        # A NO_DATA decided without the lease, whose batch's end is writing it: read after the
        # lease is taken, so that its end's check sees this refresh if this one does not see it
        # (docs/ARCHITECTURE.md, "Object storage").
        root = str(self._lease.location).rsplit("/", 1)[0]
        claim = claimed(self._objects, root, self.name)
        if claim is not None and (self.reached is None or claim > self.reached):
            self.reached = claim

    def details(self) -> Dict[str, Any]:
        return {"reached": self.reached.isoformat()} if self.reached is not None else {}

    def record(self, data_timestamp: datetime) -> None:
        """A refresh under this lock reached ``data_timestamp``: the next holder reads it."""
        if self.reached is None or data_timestamp > self.reached:
            self.reached = data_timestamp
            if self._objects is not None:
                self._record_object(self._objects, data_timestamp)
            self._write()

    def _record_object(self, objects: storage.ObjectStorage, data_timestamp: datetime) -> None:
        """Raise the reached object to ``data_timestamp`` with conditional puts, never lower it:
        a holder whose lease was taken over (it stopped renewing) may still be writing after
        the next holder recorded a later one."""
        body = json.dumps({"reached": data_timestamp.isoformat()}).encode()
        for _ in range(RECORD_ATTEMPTS):
            found = objects.fetch(self._reached_at)
            if found is None:
                if objects.create(self._reached_at, body) is not None:
                    return
                continue
            stored = _reached(found[0].decode())
            if stored is not None and stored >= data_timestamp:
                self.reached = stored
                return
            if objects.replace(self._reached_at, body, found[1]) is not None:
                return
        raise RuntimeError(
            f"The data timestamp reached by a refresh of {self.name} could not be recorded at "
            f"{self._reached_at}: other writers kept changing it. Run the refresh again."
        )


def _reached(text: str) -> Optional[datetime]:
    """The data timestamp a lock file records as reached; None in a file written before there
    was one, or that cannot be read."""
    try:
        return datetime.fromisoformat(json.loads(text)["reached"])
    except (ValueError, KeyError, TypeError):
        return None


def describe_holder(text: str) -> str:
    try:
        info = json.loads(text)
    except ValueError:
        return "another process"
    return (
        f"process {info.get('pid')} on {info.get('host')} ({info.get('command')}, since {info.get('since')})"
    )


class WriterMark:
    """This process's mark while frontiers its refreshes reached are not written yet: an
    exclusive ``flock`` on ``<root>/writers/<id>.lock``, which the OS releases if the process
    dies. A refresh of the DT in another process that finds such a refresh's commit asks
    :func:`writer_alive`: a live writer records the refresh itself when its batch ends, a dead
    one crashed."""

    def __init__(self, root: Union[str, Path]) -> None:
        self.root = str(root).rstrip("/")
        self.folder = Path(root) / WRITERS_DIR
        self._id: Optional[str] = None
        self._handle: Optional[IO[str]] = None
        found = storage.of(self.root)
        self._store = found if isinstance(found, storage.ObjectStorage) else None
        self._lease: Optional[Lease] = None

    def hold(self) -> str:
        """The mark's id, taken at the first call since the last :meth:`release`."""
        if self._id is None and self._store is not None:
            self._sweep()
            mark = uuid.uuid4().hex
            self._lease = Lease(self._store, _mark_location(self.root, mark))
            self._lease.acquire()  # a new name: no one holds it
            self._id = mark
        if self._id is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._sweep()
            mark = uuid.uuid4().hex
            # Locked under another name, then renamed: a sweep never finds it unlocked.
            taking = self.folder / f".{mark}.taking"
            handle = open(taking, "w")
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            os.rename(taking, self.folder / f"{mark}.lock")
            self._id, self._handle = mark, handle
        return self._id

    @property
    def held(self) -> Optional[str]:
        """The mark's id while it is held."""
        return self._id

    def release(self) -> None:
        """Drop the mark: everything it stood for is written."""
        mark, handle, self._id, self._handle = self._id, self._handle, None, None
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.release()
        if handle is not None:
            (self.folder / f"{mark}.lock").unlink(missing_ok=True)
            handle.close()

    def _sweep(self) -> None:
        """Delete the marks of processes that died holding one: no refresh asks of them after
        the next refresh of each of their DTs, and a crash would otherwise leave a file."""
        if self._store is not None:
            for found in self._store.files(f"{self.root}/{WRITERS_DIR}"):
                if found.name.endswith(".lock"):
                    writer_alive(self.root, found.name[: -len(".lock")])
            return
        for path in self.folder.glob("*.lock"):
            writer_alive(self.folder.parent, path.stem)


def _mark_location(root: str, mark: str) -> str:
    return f"{root}/{WRITERS_DIR}/{mark}.lock"


def writer_alive(root: Union[str, Path], mark: str) -> bool:
    """Whether the process that took ``mark`` (:class:`WriterMark`) still holds it; a mark found
    released is deleted."""
    found = storage.of(str(root))
    if isinstance(found, storage.ObjectStorage):
        location = _mark_location(str(root).rstrip("/"), mark)
        held = found.fetch(location)
        if held is None:
            return False
        try:
            holder = json.loads(held[0])
        except ValueError:
            holder = {}
        if holder_gone(holder):
            found.delete(location)
            return False
        return True
    path = Path(root) / WRITERS_DIR / f"{mark}.lock"
    try:
        handle = open(path, "r")
    except FileNotFoundError:
        return False
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        path.unlink(missing_ok=True)
        return False
