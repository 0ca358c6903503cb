"""The warehouse's URL and `storage_options`, checked where the profile is read, and what each
library (and JVM Spark) is given (docs/ARCHITECTURE.md, "Object storage")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from dbt_common.exceptions import DbtConfigError

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.connections import DyntableCredentials, warehouse_of
from dbt.adapters.dyntable.engines.jvm import JvmSparkEngine


@pytest.mark.parametrize(
    "url, said",
    [
        ("s3:/bucket/wh", "two slashes"),
        ("hdfs://namenode/wh", "scheme 'hdfs'"),
        ("s3://key:secret@bucket/wh", "never in the URL"),
        ("s3://bucket/wh?region=x", "storage_options"),
    ],
)
def test_a_url_the_adapter_cannot_serve_names_the_key_and_what_is_accepted(url: str, said: str) -> None:
    with pytest.raises(DbtConfigError) as raised:
        DyntableCredentials(schema="app", warehouse=url)
    assert said in str(raised.value) and "`warehouse" in str(raised.value)
    assert "secret" not in str(raised.value).replace("key:secret", "") or said == "never in the URL"


def test_urls_name_one_object_whatever_the_scheme_spelled(tmp_path: Path) -> None:
    creds = DyntableCredentials(
        schema="app", warehouse="s3a://bucket/wh/", storage_options={"endpoint": "http://127.0.0.1:9"}
    )
    assert warehouse_of(creds, tmp_path) == "s3://bucket/wh"
    assert storage.spark_location("s3://bucket/wh/t") == "s3a://bucket/wh/t"
    assert storage.normalized("s3a://bucket/wh/t") == "s3://bucket/wh/t"
    local = DyntableCredentials(schema="app", warehouse="wh")
    assert warehouse_of(local, tmp_path) == str((tmp_path / "wh").resolve())


def test_storage_options_take_object_stores_names_and_refuse_others() -> None:
    options = storage.storage_options(
        "s3", {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "aws_region": "eu-west-1"}
    )
    assert options["endpoint"] == "http://127.0.0.1:9" and options["region"] == "eu-west-1"
    assert options["allow_http"] == "true"  # the endpoint says plain HTTP
    with pytest.raises(storage.StorageError, match="endpoit.*it takes: .*endpoint"):
        storage.storage_options("s3", {"endpoit": "x"})
    with pytest.raises(DbtConfigError, match="local path"):
        DyntableCredentials(schema="app", warehouse="wh", storage_options={"endpoint": "x"})


def test_secrets_are_never_shown() -> None:
    found = storage.warehouse_storage(
        "s3://bucket/wh", {"access_key_id": "AKIA1", "secret_access_key": "s3cr3t"}
    )
    assert "s3cr3t" not in repr(found) and "AKIA1" in repr(found)


def test_the_engines_are_given_the_options_in_their_own_names(tmp_path: Path) -> None:
    options = {
        "endpoint": "http://127.0.0.1:9000",
        "region": "us-east-1",
        "access_key_id": "AKIA1",
        "secret_access_key": "s",
    }
    found = storage.warehouse_storage("s3://bucket/wh", options)
    assert found.engine_environment()["AWS_ENDPOINT"] == "http://127.0.0.1:9000"
    assert found.delta_options()["conditional_put"] == "etag"
    engine = JvmSparkEngine(found, spark_jars=tmp_path)
    assert engine.engine_location(found.join("app", "t")) == "s3a://bucket/wh/app/t"
    hadoop = storage.hadoop_configuration(found)
    assert hadoop["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert hadoop["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert hadoop["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert hadoop["spark.hadoop.fs.s3a.endpoint.region"] == "us-east-1"
    assert engine.metastore_folder.parts[-3:-1] == (".dyntable", "metastore")


def test_a_jvm_session_on_object_storage_is_configured_for_s3a() -> None:
    from tests.functional.profiles import spark_jars_folder

    jars = spark_jars_folder()
    if jars is None:
        pytest.skip("DYNTABLE_SPARK_JARS is not set: the JVM engine's configuration needs Delta's jars")
    found = storage.warehouse_storage("s3://bucket/wh", {"endpoint": "http://127.0.0.1:9000"})
    conf = JvmSparkEngine(found, spark_jars=jars).conf()
    assert conf["spark.sql.warehouse.dir"] == "s3a://bucket/wh"
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert str(Path.home() / ".dyntable" / "metastore") in conf["spark.driver.extraJavaOptions"]


def test_a_second_object_store_in_one_process_is_refused_not_mixed_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Sail reads an object store's settings once per process: an engine for a warehouse with
    other settings would read and write the first one's store."""
    from dbt.adapters.dyntable.engines.base import EngineError
    from dbt.adapters.dyntable.engines.embedded import EmbeddedEngine

    monkeypatch.setattr(EmbeddedEngine, "_object_store_environment", None)
    monkeypatch.setattr(os, "environ", dict(os.environ))  # what the engines set stays in the test

    def engine(endpoint: str) -> EmbeddedEngine:
        options = {"endpoint": endpoint, "region": "us-east-1", "allow_http": "true"}
        return EmbeddedEngine(storage.warehouse_storage("s3://bucket/wh", options))

    engine("http://127.0.0.1:9001")._apply_object_store_environment()
    engine("http://127.0.0.1:9001")._apply_object_store_environment()  # the same settings: fine
    with pytest.raises(EngineError, match="a process of its own"):
        engine("http://127.0.0.1:9002")._apply_object_store_environment()
