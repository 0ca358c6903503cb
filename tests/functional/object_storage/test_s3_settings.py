"""What a profile with an object-store warehouse may say, and what it must never show
(docs/ARCHITECTURE.md, "Object storage")."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pytest

from dbt.adapters.dyntable.testing.s3_server import S3Server
from tests.functional.object_storage.helpers import S3Project

DBT = str(Path(sys.executable).with_name("dbt"))


#: The other URLs and options refused are unit-tested (tests/unit/test_storage.py): this one runs
#: dbt to show no local folder stands in for the remote warehouse.
@pytest.mark.parametrize("warehouse, said", [("s3:/bucket/wh", "two slashes")])
def test_a_url_the_adapter_cannot_serve_fails_naming_the_key(
    tmp_path: Path, s3: S3Server, warehouse: str, said: str
) -> None:
    project = S3Project(tmp_path, s3, warehouse)
    done = project.run(DBT, "run", "--profiles-dir", ".", check=False)
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "`warehouse" in output and said in output, output[-3000:]
    assert "secret" not in output.replace("(secret)", "") or said == "never in the URL"
    # No local folder stands in for the remote warehouse.
    assert not any(p.name.startswith(("s3", "hdfs")) for p in tmp_path.rglob("*"))


def test_secrets_given_in_the_profile_are_never_written_or_shown(
    tmp_path: Path, s3: S3Server, s3_warehouse: str
) -> None:
    options = {
        **s3.storage_options(),
        "access_key_id": s3.access_key_id,
        "secret_access_key": s3.secret_access_key,
    }
    project = S3Project(tmp_path, s3, s3_warehouse, storage_options=options)
    project.write(
        "models/sources.yml",
        "version: 2\nsources:\n  - name: raw\n    schema: raw\n    tables:\n      - name: t\n      - name: missing\n",
    )
    project.write(
        "models/t_dt.sql",
        "{{ config(materialized='dynamic_table', target_lag='1 minute') }}\nselect x, count(*) as n from {{ source('raw', 't') }} group by x",
    )
    project.write(
        "models/bad_dt.sql",
        "{{ config(materialized='dynamic_table', target_lag='1 minute') }}\nselect * from {{ source('raw', 'missing') }}",
    )
    project.write_source("t", pa.table({"x": [1, 2, 2]}))
    no_keys = {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}
    ran = project.run(DBT, "--debug", "run", "--profiles-dir", ".", env=no_keys, check=False)
    assert "OK created" in ran.stdout and "bad_dt" in ran.stdout  # one DT built, one failed
    project.run(DBT, "debug", "--profiles-dir", ".", env=no_keys, check=False)
    secret = s3.secret_access_key
    assert secret not in ran.stdout + ran.stderr
    for written in list((tmp_path / "target").rglob("*")) + list((tmp_path / "logs").rglob("*")):
        if written.is_file():
            assert secret not in written.read_text(errors="replace"), written
    store = project.store()
    assert secret not in repr(store.history()) + repr(store.frontiers()) + repr(store.graph())
