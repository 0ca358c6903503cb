"""Rows named by position (a deletion vector's) are read from the row groups holding them only, each
up to its last wanted row."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dbt.adapters.dyntable import data_files
from dbt.adapters.dyntable.data_files import _rows_at

ROWS = 50_000


@pytest.fixture(scope="module")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rows_at") / "part.parquet"
    pq.write_table(
        pa.table({"id": np.arange(ROWS), "name": [f"n{i}" for i in range(ROWS)]}), path, row_group_size=7_000
    )
    return path


@pytest.mark.parametrize(
    "positions",
    [[0], [6_999, 7_000], [ROWS - 1, 13, 35_000], list(range(0, ROWS, 997)), [21_000, 21_000 - 1]],
)
def test_the_rows_at_positions_in_their_order(data_file: Path, positions: list) -> None:
    rows = _rows_at(pq.ParquetFile(data_file), ["id", "name"], np.array(positions))
    assert rows.column("id").to_pylist() == positions
    assert rows.column("name").to_pylist() == [f"n{i}" for i in positions]


def test_only_the_row_groups_holding_them_are_read_up_to_the_last(
    data_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read = []
    original = pq.ParquetFile.iter_batches

    def counted(self: pq.ParquetFile, batch_size: int, row_groups: list, **kwargs: object):
        for batch in original(self, batch_size, row_groups=row_groups, **kwargs):
            read.append((row_groups, batch.num_rows))
            yield batch

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", counted)
    monkeypatch.setattr(data_files, "POSITIONED_BATCH_ROWS", 1_000)
    rows = _rows_at(pq.ParquetFile(data_file), ["id"], np.array([49_000, 8_500]))
    assert rows.column("id").to_pylist() == [49_000, 8_500]
    # Group 1 (rows 7,000-13,999) up to its second batch; group 7 (49,000-49,999) its first.
    assert read == [([1], 1_000), ([1], 1_000), ([7], 1_000)]


def test_no_positions_no_rows(data_file: Path) -> None:
    rows = _rows_at(pq.ParquetFile(data_file), ["name", "id"], np.array([], np.int64))
    assert rows.num_rows == 0 and rows.column_names == ["name", "id"]


def test_view_types_come_back_plain(tmp_path: Path) -> None:
    """The `deltalake` package writes an UPDATE's strings as `string_view`, which `take` cannot pick
    from: the rows come back as plain strings."""
    path = tmp_path / "views.parquet"
    names = pa.array([f"n{i}" for i in range(100)], pa.string_view())
    pq.write_table(pa.table({"id": np.arange(100), "name": names}), path, row_group_size=30)
    assert pq.ParquetFile(path).schema_arrow.field("name").type == pa.string_view()
    rows = _rows_at(pq.ParquetFile(path), ["name", "id"], np.array([95, 3]))
    assert rows.schema.field("name").type == pa.string()
    assert rows.to_pylist() == [{"name": "n95", "id": 95}, {"name": "n3", "id": 3}]
