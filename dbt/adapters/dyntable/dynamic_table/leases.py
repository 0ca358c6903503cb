"""Locks without a shared file system: a lease object in the warehouse's object store.

A holder creates ``<name>.lock`` with a conditional put (``If-None-Match: *``): of processes on
any machines, exactly one create succeeds. It writes who it is and until when the lease runs, and
renews it (``If-Match`` on the version it wrote) from a thread of its own while it holds it. A
lease that ran out, or whose holder is a process of this machine that is gone (killed mid-refresh),
is taken over with a conditional put on the version found, so two takers cannot both win. Released,
the object is deleted. (docs/ARCHITECTURE.md, "Object storage".)
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import threading
import time
import uuid
from typing import Any, Dict, List, Optional

from dbt.adapters.dyntable.storage import ObjectStorage

logger = logging.getLogger(__name__)

#: How long a lease runs without renewal: a holder that stops renewing (a machine gone) blocks
#: others at most this long, plus :data:`CLOCK_MARGIN_SECONDS`.
LEASE_SECONDS = 60.0
#: A holder renews its leases this often.
RENEW_SECONDS = LEASE_SECONDS / 4
#: Machines' clocks may differ by this much: a lease counts as run out only this long after the
#: time its holder wrote.
CLOCK_MARGIN_SECONDS = 30.0


def _process_start(pid: int) -> Optional[str]:
    """When process ``pid`` started (clock ticks since boot), to tell it from a later process
    given the same id; None where /proc does not say."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return fields[19].decode()
    except (OSError, IndexError):
        return None


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as boot:
            return boot.read().strip()
    except OSError:
        return ""


_HOST = socket.gethostname()
_BOOT = _boot_id()


def describe(holder: Dict[str, Any]) -> str:
    """Who holds a lease, for messages."""
    return (
        f"process {holder.get('pid')} on {holder.get('host')} ({holder.get('command')}, since "
        f"{holder.get('since')})"
    )


def holder_gone(holder: Dict[str, Any], now: Optional[float] = None) -> bool:
    """Whether the holder a lease names no longer holds it: its lease ran out, or it is a process
    of this machine that is not running."""
    now = time.time() if now is None else now
    try:
        expires = float(holder.get("expires", 0))
    except (TypeError, ValueError):
        return True
    if now > expires + CLOCK_MARGIN_SECONDS:
        return True
    if holder.get("host") != _HOST or holder.get("boot") != _BOOT:
        return False
    pid = int(holder.get("pid") or 0)
    started = _process_start(pid) if pid > 0 else None
    return started is None or (holder.get("started") not in (None, started))


class Lease:
    """One lease object: taken, renewed while held, released."""

    def __init__(
        self, storage: ObjectStorage, location: str, details: Optional[Dict[str, Any]] = None
    ) -> None:
        """``details``: written in the object beside who holds it (a batch's claims)."""
        self.storage = storage
        self.location = location
        self.details = dict(details or {})
        self.token = uuid.uuid4().hex
        self._tag: Optional[str] = None
        self.lost = False
        self._since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    def _body(self) -> bytes:
        return json.dumps(
            {
                "pid": os.getpid(),
                "host": _HOST,
                "boot": _BOOT,
                "started": _process_start(os.getpid()),
                "command": " ".join(os.path.basename(a) for a in sys.argv[:2]),
                "since": self._since,
                "expires": time.time() + LEASE_SECONDS,
                "token": self.token,
                **self.details,
            }
        ).encode()

    def acquire(self) -> Optional[Dict[str, Any]]:
        """Take the lease: None when taken, else who holds it."""
        for _ in range(3):
            tag = self.storage.create(self.location, self._body())
            if tag is not None:
                self._held(tag)
                return None
            found = self.storage.fetch(self.location)
            if found is None:
                continue  # released meanwhile: create again
            data, tag = found
            holder = _parsed(data)
            if not holder_gone(holder):
                return holder
            taken = self.storage.replace(self.location, self._body(), tag)
            if taken is not None:
                logger.info("dyntable: took over the lease %s from %s", self.location, describe(holder))
                self._held(taken)
                return None
        found = self.storage.fetch(self.location)
        return _parsed(found[0]) if found is not None else {}

    def _held(self, tag: str) -> None:
        self._tag = tag
        _keeper.add(self)

    def renew(self) -> None:
        if self._tag is None or self.lost:
            return
        tag = self.storage.replace(self.location, self._body(), self._tag)
        if tag is None:
            self.lost = True
            logger.warning("dyntable: the lease %s was taken over while held (renewal failed)", self.location)
        else:
            self._tag = tag

    def release(self) -> None:
        _keeper.remove(self)
        if self._tag is not None and not self.lost:
            self.storage.delete(self.location)
        self._tag = None


def _parsed(data: bytes) -> Dict[str, Any]:
    """A lease's holder as written; empty when it does not parse (a lease no one holds)."""
    try:
        holder = json.loads(data)
    except ValueError:
        return {}
    return holder if isinstance(holder, dict) else {}


class _Keeper:
    """Renews this process's leases from one thread while any is held."""

    def __init__(self) -> None:
        self._leases: List[Lease] = []
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._thread: Optional[threading.Thread] = None

    def add(self, lease: Lease) -> None:
        with self._lock:
            self._leases.append(lease)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="dyntable-leases", daemon=True)
                self._thread.start()

    def remove(self, lease: Lease) -> None:
        with self._lock:
            if lease in self._leases:
                self._leases.remove(lease)

    def _run(self) -> None:
        while True:
            with self._lock:
                self._wake.wait(RENEW_SECONDS)
                held = list(self._leases)
            for lease in held:
                try:
                    lease.renew()
                except Exception as exc:  # noqa: BLE001 - a store that does not answer: next round
                    logger.warning("dyntable: renewing the lease %s failed: %s", lease.location, exc)


_keeper = _Keeper()
