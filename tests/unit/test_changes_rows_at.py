"""Rows named by position (a deletion vector's) are read from the row groups holding them only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

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


def test_only_the_row_groups_holding_them_are_read(data_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    read = []
    original = pq.ParquetFile.read_row_groups

    def counted(self: pq.ParquetFile, row_groups: list, *args: object, **kwargs: object) -> pa.Table:
        read.extend(row_groups)
        return original(self, row_groups, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", counted)
    _rows_at(pq.ParquetFile(data_file), ["id"], np.array([7_001, 49_000]))
    assert read == [1, 7]
