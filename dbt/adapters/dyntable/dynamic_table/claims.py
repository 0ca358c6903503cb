"""NO_DATA without the DT's lease, in an object store (docs/ARCHITECTURE.md, "Object storage").

A refresh that finds nothing to do decides without taking its DT's lease, which would cost two
writes per DT. What it reached (its frontier, its history row) waits for its batch's end like any
NO_DATA's, as a :class:`Claim`. The batch's end publishes the claims in one object (a lease with
the claims in it), then checks each DT: a refresh that holds its lease now, recorded a data
timestamp past the frontier the claim read, or wrote a commit of the DT since, may not have seen
the claim, so the claim is withdrawn (its frontier not written, its history row SKIPPED). A
refresh that takes a lease reads the published claims of its DT (:func:`claimed`) after taking
it, before it reads the frontier: either it sees the claim, or the claim's check sees it. Then the
frontiers and history are written and the object deleted.
"""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Dict, List, Optional, Set

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.delta_log import DeltaLog
from dbt.adapters.dyntable.dynamic_table.leases import Lease, holder_gone

#: The folder of the published claims, under the locks' folder.
CLAIMS_DIR = "claims"
#: DTs checked side by side at a batch's end (a request each, mostly waiting).
CHECK_THREADS = 8
#: What a withdrawn claim's history row says.
WITHDRAWN = (
    "NO_DATA decided without the table's lease, withdrawn: another refresh moved the table "
    "meanwhile, and its data timestamp stands"
)


@dataclass(frozen=True)
class Claim:
    """A NO_DATA refresh decided without its DT's lease: the data timestamp it reached, and
    what it read of the DT (its frontier's data timestamp, the latest version of its log, the
    log's location)."""

    name: str
    refresh_id: str
    data_timestamp: datetime
    base_data_timestamp: datetime
    dt_version: int
    dt_location: str


def lease_free(locks: str) -> bool:
    """Whether refreshes under the locks' folder ``locks`` decide NO_DATA without the lease: in
    an object store, where taking it costs two writes. A local lock is an ``flock``."""
    return isinstance(storage.of(locks), storage.ObjectStorage)


def publish(locks: str, claims: List[Claim]) -> Lease:
    """Publish ``claims`` in one object, held until :meth:`Lease.release`."""
    objects = storage.of(locks)
    assert isinstance(objects, storage.ObjectStorage)
    stamps = {c.name: c.data_timestamp.isoformat() for c in claims}
    lease = Lease(objects, f"{locks}/{CLAIMS_DIR}/{uuid.uuid4().hex}.json", {"claims": stamps})
    lease.acquire()  # a new name: no one holds it
    return lease


def moved(locks: str, claims: List[Claim]) -> List[Claim]:
    """The claims whose DT another refresh may have moved since they read it: its lease is
    held, it recorded a data timestamp past the frontier the claim read, or its log has a commit
    past the version the claim read. One listing of the locks, then per DT its reached data
    timestamp and one listing of its log."""
    objects = storage.of(locks)
    assert isinstance(objects, storage.ObjectStorage)
    listed = {found.name for found in objects.files(locks)}

    def moved_since(claim: Claim) -> bool:
        if f"{claim.name}.lock" in listed:
            return True
        reached = _reached(objects, f"{locks}/{claim.name}.reached", listed)
        if reached is not None and reached > claim.base_data_timestamp:
            return True
        log = DeltaLog(claim.dt_location, since=claim.dt_version)
        return not log.exists() or log.latest_version() != claim.dt_version

    with ThreadPoolExecutor(CHECK_THREADS) as pool:
        return [claim for claim, gone in zip(claims, pool.map(moved_since, claims)) if gone]


def _reached(objects: storage.ObjectStorage, location: str, listed: Set[str]) -> Optional[datetime]:
    if location.rsplit("/", 1)[-1] not in listed:
        return None
    recorded = objects.read(location)
    try:
        return datetime.fromisoformat(json.loads(recorded or b"")["reached"])
    except (ValueError, KeyError, TypeError):
        return None


def claimed(objects: storage.ObjectStorage, locks: str, name: str) -> Optional[datetime]:
    """The latest data timestamp a batch's end claims for DT ``name`` while it writes it; a
    claim whose holder is gone is deleted."""
    latest = None
    for found in objects.files(f"{locks}/{CLAIMS_DIR}"):
        location = f"{locks}/{CLAIMS_DIR}/{found.name}"
        body = objects.read(location)
        try:
            holder: Dict[str, Any] = json.loads(body or b"")
            stamp = holder.get("claims", {}).get(name)
        except (ValueError, AttributeError):
            continue
        if holder_gone(holder):
            objects.delete(location)
            continue
        if isinstance(stamp, str):
            at = datetime.fromisoformat(stamp)
            latest = at if latest is None or at > latest else latest
    return latest
