"""Locks in an object store are lease objects (docs/ARCHITECTURE.md, "Object storage"): one
holder at a time across processes and machines, taken over from a holder that died on this
machine at once and from one elsewhere only once its lease ran out."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

import pytest

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.dynamic_table.leases import CLOCK_MARGIN_SECONDS, LEASE_SECONDS
from dbt.adapters.dyntable.dynamic_table.locking import RefreshLock, RefreshLocked, WriterMark, writer_alive
from dbt.adapters.dyntable.testing.s3_server import S3Server

HOLD = """
import sys, time
from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.dynamic_table.locking import RefreshLock
storage.warehouse_storage(sys.argv[1], {"endpoint": sys.argv[2], "allow_http": True, "region": "us-east-1"})
RefreshLock(sys.argv[1], "app.dt").acquire()
print("held", flush=True)
time.sleep(600)
"""


def test_a_lease_is_held_once_and_taken_from_the_gone(s3: S3Server, s3_warehouse: str) -> None:
    locks = f"{s3_warehouse}/.locks"
    found = storage.warehouse_storage(locks, s3.storage_options())
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, locks, s3.endpoint],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **s3.credentials()},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(RefreshLocked, match=f"process {holder.pid} on"):
            RefreshLock(locks, "app.dt").acquire()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # Killed on this machine: its lease is taken over at once, not after it runs out.
    RefreshLock(locks, "app.dt").acquire().release()

    # A holder on another machine: waited for while its lease runs, taken over once it ran out.
    elsewhere = {"pid": 1, "host": "elsewhere", "boot": "x", "since": "then", "command": "dbt run"}
    location = f"{locks}/app.other.lock"
    found.write(location, json.dumps({**elsewhere, "expires": time.time() + LEASE_SECONDS}).encode())
    with pytest.raises(RefreshLocked, match="elsewhere"):
        RefreshLock(locks, "app.other").acquire()
    found.write(
        location, json.dumps({**elsewhere, "expires": time.time() - CLOCK_MARGIN_SECONDS - 1}).encode()
    )
    RefreshLock(locks, "app.other").acquire().release()
    assert found.read(location) is None  # released: deleted


def test_the_data_timestamp_a_refresh_reached_is_read_by_the_next_holder(
    s3: S3Server, s3_warehouse: str
) -> None:
    """What the lock records (docs/ARCHITECTURE.md, "Exactly once") holds under a lease too: the
    next holder reads the latest data timestamp reached, and an earlier one never lowers it, even
    from a holder whose lease was taken over while it still wrote."""
    locks = f"{s3_warehouse}/.locks"
    storage.warehouse_storage(locks, s3.storage_options())
    later = datetime(2026, 12, 1, 12, 0, 30, tzinfo=timezone.utc)
    with RefreshLock(locks, "app.dt") as first:
        assert first.reached is None
        first.record(later)
        first.record(later - timedelta(seconds=10))  # an earlier one: kept as it was
    with RefreshLock(locks, "app.dt") as second:
        assert second.reached == later
        stale = RefreshLock(locks, "app.dt")  # a holder whose lease ran out, still writing
        stale.reached = None
        assert stale._objects is not None
        stale._record_object(stale._objects, later - timedelta(minutes=1))
        assert stale.reached == later
    with RefreshLock(locks, "app.dt") as third:
        assert third.reached == later


def test_a_writer_mark_is_alive_while_held(s3: S3Server, s3_warehouse: str) -> None:
    root = f"{s3_warehouse}/.locks"
    storage.warehouse_storage(root, s3.storage_options())
    mark = WriterMark(root)
    taken = mark.hold()
    assert writer_alive(root, taken)
    mark.release()
    assert not writer_alive(root, taken)


def test_the_server_refuses_a_request_without_credentials(s3: S3Server) -> None:
    import urllib.error
    import urllib.request

    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{s3.endpoint}/{s3.bucket}?list-type=2", timeout=30)
    assert refused.value.code == 403
    wrong = storage.ObjectStorage(
        storage.parse_url(s3.url()),
        {**s3.storage_options(), "secret_access_key": "wrong", "access_key_id": s3.access_key_id},
    )
    with pytest.raises(Exception, match="(?i)denied|forbidden|403|privileges"):
        wrong.files(s3.url("anything"))
