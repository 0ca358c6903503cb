"""Damage to a table's own files is found in an object store as on a local disk, and a damaged
table's folder is set aside there (docs/ARCHITECTURE.md, "Damage"): the checks and the move go
through the warehouse's storage layer."""

from __future__ import annotations

import pyarrow as pa

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.table_damage import damage
from dbt.adapters.dyntable.testing.s3_server import S3Server


def test_damage_in_an_object_store_is_named_and_set_aside(s3: S3Server, s3_warehouse: str) -> None:
    store = storage.warehouse_storage(s3_warehouse, s3.storage_options())
    location = f"{s3_warehouse}/app/dt"
    log = f"{location}/_delta_log"
    for start in (1, 3, 5):
        rows = pa.table({"id": pa.array([start, start + 1], pa.int64())})
        storage.write_delta(location, rows, mode="append")
    assert damage(location) is None

    storage.delta_table(location).create_checkpoint()
    checkpoint = f"{log}/{2:020d}.checkpoint.parquet"
    kept = store.read(checkpoint)
    assert kept is not None
    store.write(checkpoint, b"\x07" * 200)
    assert (damage(location) or "").startswith("its checkpoint of version 2 is corrupt")
    store.write(checkpoint, kept)

    for start in (7, 8):  # versions 3 and 4: a reader replays both after the checkpoint
        storage.write_delta(location, pa.table({"id": pa.array([start], pa.int64())}), mode="append")
    commit = f"{log}/{3:020d}.json"
    whole = store.read(commit)
    assert whole is not None
    store.write(commit, whole[: len(whole) // 2])
    assert (damage(location) or "").startswith("the commit of version 3 is truncated or corrupt")
    store.delete(commit)
    assert (damage(location) or "").startswith("the commit of version 3 is missing")
    store.write(commit, whole)

    data = [f for f in store.files(location) if f.name.endswith(".parquet")]
    store.delete(f"{location}/{data[0].name}")
    assert "of the 5 data files its latest version lists are missing" in (damage(location) or "")

    moved = f"{s3_warehouse}/app/.damaged/dt"
    store.move_tree(location, moved)
    assert store.files(location) == [] and store.read(f"{moved}/_delta_log/{3:020d}.json") == whole
