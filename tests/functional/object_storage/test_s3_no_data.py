"""NO_DATA on object storage is decided without the DT's lease and writes nothing until its batch's
end, and a refresh that holds the lease never sees the DT's data timestamp go back because of it
(docs/ARCHITECTURE.md, "Object storage"). Two metadata stores on one warehouse stand for two
processes: each has batches of its own."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import List

import pyarrow as pa
import pytest

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.dynamic_table import claims
from dbt.adapters.dyntable.dynamic_table.lifecycle import RefreshRequest, Trigger
from dbt.adapters.dyntable.dynamic_table.locking import RefreshLock
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService
from dbt.adapters.dyntable.testing.s3_server import S3Server
from tests.functional.lifecycle.test_races import by_version, out_of_order
from tests.functional.object_storage.helpers import S3Project

MODEL = (
    "{{ config(materialized='dynamic_table', target_lag='1 minute') }}\n"
    "select customer_id, count(*) as orders from {{ source('raw', 'orders') }} group by customer_id"
)
NAME = "app.orders_dt"
WRITES = ("PUT", "POST", "DELETE")


def orders(ids: List[int]) -> pa.Table:
    return pa.table(
        {
            "order_id": pa.array(ids, pa.int64()),
            "customer_id": pa.array([i % 3 for i in ids], pa.int64()),
        }
    )


@pytest.fixture
def project(tmp_path: Path, s3: S3Server, s3_warehouse: str) -> S3Project:
    project = S3Project(tmp_path, s3, s3_warehouse).over_source(
        "orders", orders([1, 2, 3]), "orders_dt", MODEL
    )
    project.dbt("run")
    return project


def services(project: S3Project) -> List[DynamicTableService]:
    """Two processes' services on the project's warehouse: the same engine, stores of their own."""
    engine = project.engine()
    project.store()  # this process's settings for the warehouse
    return [DynamicTableService(engine, project.warehouse, "dyntable_meta") for _ in range(2)]


def orders_dt(project: S3Project) -> DynamicTable:
    frontier = project.store().frontier(NAME)
    assert frontier is not None
    node = {"schema": "app", "name": "orders_dt", "compiled_code": frontier.definition}
    return DynamicTable.from_node({**node, "config": {"target_lag": "1 minute"}})


def at(seconds: float, full_refresh: bool = False) -> RefreshRequest:
    moment = datetime.now(timezone.utc) + timedelta(seconds=seconds)
    return RefreshRequest(moment, Trigger.SCHEDULED, full_refresh=full_refresh)


def test_a_no_data_refresh_writes_nothing(project: S3Project, s3: S3Server) -> None:
    service, _ = services(project)
    dt = orders_dt(project)
    request = at(0)
    service.open_batch()
    s3.reset()
    result = service.refresh(dt, request)
    log = s3.request_log()
    assert (str(result.action), str(result.state)) == ("NO_DATA", "SUCCEEDED")
    assert [line for line in log if line.split(" ")[0] in WRITES] == []
    assert not any("/.locks/" in line for line in log), log  # no lease taken, none read
    service.close_batch()
    frontier = project.store().frontier(NAME)
    assert frontier is not None and frontier.data_timestamp == request.data_timestamp
    last = project.history("orders_dt")[-1]
    assert (str(last.refresh_action), str(last.state)) == ("NO_DATA", "SUCCEEDED")


def test_a_locked_refresh_at_an_earlier_data_timestamp_withdraws_a_lease_free_no_data(
    project: S3Project,
) -> None:
    """The lease-free NO_DATA decides at T; a `--full-refresh` that started before it (data
    timestamp T - 60 s) takes the lease while the NO_DATA's batch is still open, so it cannot see
    it: the NO_DATA's batch end finds the DT moved and withdraws it, and no version of the DT holds
    a later data timestamp than the next one."""
    lease_free, locked = services(project)
    dt = orders_dt(project)
    before = project.store().frontier(NAME)
    assert before is not None
    lease_free.open_batch()
    no_data = lease_free.refresh(dt, at(0))
    assert (str(no_data.action), str(no_data.state)) == ("NO_DATA", "SUCCEEDED")
    with locked.batch():
        rebuilt = locked.refresh(dt, at(-60, full_refresh=True))
        assert str(rebuilt.action) == "REINITIALIZE"
        lease_free.close_batch()
        # Withdrawn: the DT's data timestamp stays where it was, not at the NO_DATA's.
        kept = project.store().frontier(NAME)
        assert kept is not None and kept.data_timestamp == before.data_timestamp
    after = project.store().frontier(NAME)
    assert after is not None and after.data_timestamp == rebuilt.data_timestamp
    rows = project.history("orders_dt")
    withdrawn = [r for r in rows if r.state_message == claims.WITHDRAWN]
    assert len(withdrawn) == 1 and str(withdrawn[0].state) == "SKIPPED"
    assert out_of_order(by_version(rows)) == []
    project.assert_matches("orders_dt")


def test_a_locked_refresh_reads_a_claim_being_written(project: S3Project) -> None:
    """A batch's end publishes its claims before it checks the DTs: a refresh that takes the
    lease meanwhile reads them and holds the later data timestamp (skips an earlier one)."""
    service, _ = services(project)
    locks = service.metadata.locks
    later = datetime.now(timezone.utc) + timedelta(minutes=5)
    claim = claims.Claim(NAME, "r", later, later - timedelta(minutes=10), 0, project.warehouse)
    published = claims.publish(locks, [claim])
    try:
        with RefreshLock(locks, NAME) as lock:
            assert lock.reached == later
        with service.batch():
            rebuilt = service.refresh(orders_dt(project), at(0, full_refresh=True))
        assert rebuilt.data_timestamp == later, rebuilt
    finally:
        published.release()
    found = storage.of(locks)
    assert isinstance(found, storage.ObjectStorage) and claims.claimed(found, locks, NAME) is None


def test_two_lease_free_no_data_keep_the_later_data_timestamp(project: S3Project) -> None:
    """Two NO_DATA decided without the lease from one frontier are stamped alike: whichever
    batch ends last, the later data timestamp stands."""
    first, second = services(project)
    dt = orders_dt(project)
    earlier = at(0)
    later = replace(earlier, data_timestamp=earlier.data_timestamp + timedelta(milliseconds=1))
    first.open_batch()
    second.open_batch()
    assert str(first.refresh(dt, later).state) == "SUCCEEDED"
    assert str(second.refresh(dt, earlier).state) == "SUCCEEDED"
    first.close_batch()
    second.close_batch()
    frontier = project.store().frontier(NAME)
    assert frontier is not None and frontier.data_timestamp == later.data_timestamp
    project.write_source("orders", orders([4, 5]))
    project.dbt("run")  # a change is decided under the lease and applied
    assert project.last_action("orders_dt") == "INCREMENTAL"
    project.assert_matches("orders_dt")
