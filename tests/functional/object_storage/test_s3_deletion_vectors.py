"""A source in an object store whose deletes and updates write deletion vectors refreshes
incrementally: each vector is read from the object its commit names, checksum checked
(docs/ARCHITECTURE.md, "Reading sources")."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from dbt.adapters.dyntable.delta_log import DeltaLog
from dbt.adapters.dyntable.testing.s3_server import S3Server
from tests.functional.object_storage.helpers import S3Project

MODEL = (
    "{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}\n"
    "select kind, count(*) as n, sum(amount) as total from {{ source('raw', 'events') }} group by kind"
)


def test_a_source_with_deletion_vectors_in_an_object_store(
    tmp_path: Path, s3: S3Server, s3_warehouse: str
) -> None:
    project = S3Project(tmp_path, s3, s3_warehouse)
    project.write(
        "models/sources.yml",
        "version: 2\nsources:\n  - name: raw\n    schema: raw\n    tables:\n      - name: events\n",
    )
    project.write("models/by_kind.sql", MODEL)
    ids = list(range(40))
    events = pa.table({"id": ids, "kind": [f"k{i % 3}" for i in ids], "amount": [i + 0.5 for i in ids]})
    project.write_source("events", events, configuration={"delta.enableDeletionVectors": "true"})
    project.dbt("run")
    project.store()  # this process's settings for the warehouse
    log = DeltaLog(project.source("events"))
    for change in (
        "delete from raw.events where id in (4, 7, 20)",
        "update raw.events set amount = 0.5 where id in (5, 6)",  # the same file's vector grows
    ):
        project.engine().execute(change)
        assert log.snapshot(log.latest_version()).deleted_rows, change
        project.dbt("run")
        assert project.last_action("by_kind") == "INCREMENTAL", change
        project.assert_matches("by_kind")
