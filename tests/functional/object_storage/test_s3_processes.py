"""Processes sharing a warehouse on object storage (docs/ARCHITECTURE.md, "Object storage"): a
refresh killed mid-way recovers, two processes never refresh one table at once, and the locks
are lease objects in the bucket, not files on a shared disk."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from dbt.cli.main import dbtRunner

from dbt.adapters.dyntable.dynamic_table.failpoints import ENV
from dbt.adapters.dyntable.dynamic_table.locking import RefreshLock, RefreshLocked
from dbt.adapters.dyntable.testing.s3_server import S3Server
from tests.functional.object_storage.helpers import S3Project

DBT = str(Path(sys.executable).with_name("dbt"))
MODEL = (
    "{{ config(materialized='dynamic_table', target_lag='1 minute') }}\n"
    "select customer_id, count(*) as orders, sum(amount) as amount from {{ source('raw', 'orders') }} "
    "group by customer_id"
)


def orders(ids) -> pa.Table:
    return pa.table(
        {
            "order_id": pa.array(ids, pa.int64()),
            "customer_id": pa.array([i % 3 for i in ids], pa.int64()),
            "amount": pa.array([float(i) for i in ids]),
        }
    )


@pytest.fixture
def project(tmp_path: Path, s3: S3Server, s3_warehouse: str) -> S3Project:
    project = S3Project(tmp_path, s3, s3_warehouse).over_source(
        "orders", orders([1, 2, 3]), "orders_dt", MODEL
    )
    return project


# After the DT's commit, before its frontier: the case only a lease that outlives its holder can
# get wrong (every step is covered on local disk by tests/functional/dynamic_table/test_crash_recovery.py).
@pytest.mark.parametrize("failpoint, recovered", [("after_apply", "SUCCEEDED")])
def test_a_refresh_killed_mid_way_recovers(project: S3Project, failpoint: str, recovered: str) -> None:
    project.dbt("run")
    project.write_source("orders", orders([4, 5]))
    killed = project.run(DBT, "run", "--profiles-dir", ".", env={ENV: failpoint}, check=False)
    assert killed.returncode < 0 or killed.returncode == 137, killed.stdout[-2000:]
    # The killed process's lease is still in the bucket: a process of this machine (this one,
    # which read the warehouse before the kill) finds its holder gone and takes it over at once.
    project.dbt("run")
    history = project.history("orders_dt")
    assert [r.state.value for r in history if r.refresh_trigger.value == "RECOVERY"] == [recovered]
    project.assert_matches("orders_dt")


def test_two_processes_never_refresh_one_table_at_once(project: S3Project, s3: S3Server) -> None:
    project.dbt("run")
    lock_root = f"{project.warehouse}/dyntable_meta/.locks"
    held = RefreshLock(lock_root, "app.orders_dt").acquire()
    try:
        project.write_source("orders", orders([6, 7]))
        with pytest.raises(RefreshLocked, match="being refreshed by process"):
            RefreshLock(lock_root, "app.orders_dt").acquire()
        # dbt run waits for the other process's refresh to end (here: the lease released), then
        # refreshes: its data timestamp must not go back behind what that refresh reached.
        released = threading.Timer(3.0, held.release)
        released.start()
        waited = dbtRunner().invoke(
            ["run", "--project-dir", str(project.root), "--profiles-dir", str(project.root)]
        )
        released.join()
        assert waited.success, waited.result
    finally:
        held.release()
    project.write_source("orders", orders([8, 9]))
    # Two at once, each in its own process: one refresh applies the change, never two.
    commands = [DBT, "run", "--profiles-dir", "."]
    both = [
        subprocess.Popen(
            commands,
            cwd=project.root,
            env={**__import__("os").environ, **s3.credentials()},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=600)[0] for p in both]
    assert any(p.returncode == 0 for p in both), outputs
    applied = [
        r
        for r in project.history("orders_dt")
        if r.refresh_action is not None and r.refresh_action.value == "INCREMENTAL"
    ]
    # One for the change the waiting run applied, one for the change the two runs raced over.
    assert len(applied) == 2, [(r.refresh_action, r.state, r.reason) for r in project.history("orders_dt")]
    project.assert_matches("orders_dt")
