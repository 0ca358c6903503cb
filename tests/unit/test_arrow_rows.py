"""A data file read in this process comes out as the engine reads it: the snapshot's columns in
Spark's Arrow types, found by name as Spark's Parquet reader finds them, NULL where the file
predates a column, the partition values from the log; and where Arrow would read a value
otherwise, it refuses."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from dbt.adapters.dyntable.data_files import NotReadableInProcess, arrow_rows, arrow_schema
from dbt.adapters.dyntable.delta_log import DataFile, Snapshot
from dbt.adapters.dyntable.vocabulary import WEIGHT

SCHEMA = StructType(
    [
        StructField("id", LongType()),
        StructField("at", TimestampType()),
        StructField("later", StringType()),
        StructField("region", StringType()),
    ]
)
SNAPSHOT = Snapshot(
    version=1,
    table_id="t",
    schema_json=SCHEMA.json(),
    partition_columns=("region",),
    configuration={},
    files={},
)


def data_file(tmp_path: Path, rows: pa.Table) -> DataFile:
    path = tmp_path / "part.parquet"
    pq.write_table(rows, path)
    return DataFile("part.parquet", path.as_uri(), path.stat().st_size, rows.num_rows, {"region": "eu west"})


def test_the_engines_columns_and_types(tmp_path: Path) -> None:
    at = [datetime(2024, 1, 1, 12, tzinfo=timezone.utc), None, datetime(2025, 6, 30, tzinfo=timezone.utc)]
    written = pa.table(
        {"ID": pa.array([1, 2, 3], pa.int32()), "at": pa.array(at, pa.timestamp("ms", "UTC"))}  # no `later`
    )
    rows = arrow_rows(SNAPSHOT, data_file(tmp_path, written), np.array([1]), -1, arrow_schema(SCHEMA))
    assert rows.schema.names == ["id", "at", "later", "region", WEIGHT]
    assert rows.schema.field("id").type == pa.int64() and rows.schema.field("at").type == pa.timestamp(
        "us", "UTC"
    )
    assert rows.to_pylist() == [
        {"id": i, "at": t, "later": None, "region": "eu west", WEIGHT: -1}
        for i, t in ((1, at[0]), (3, at[2]))
    ]


def test_a_timestamp_without_a_zone_is_left_to_the_engine(tmp_path: Path) -> None:
    """Spark reads it through the session's time zone, which Arrow does not know."""
    written = pa.table({"id": [1], "at": pa.array([datetime(2024, 1, 1)], pa.timestamp("us"))})
    with pytest.raises(NotReadableInProcess, match="at"):
        arrow_rows(SNAPSHOT, data_file(tmp_path, written), np.array([], np.int64), 1, arrow_schema(SCHEMA))


def test_nested_columns_are_left_to_the_engine() -> None:
    nested = StructType([StructField("s", StructType([StructField("x", LongType())]))])
    with pytest.raises(NotReadableInProcess, match="nested"):
        arrow_schema(nested)
