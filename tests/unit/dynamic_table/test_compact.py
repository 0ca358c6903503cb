"""When a DT's compaction falls due (docs/ARCHITECTURE.md, "Compaction"): small files counted per
partition, as a compaction merges them."""

from __future__ import annotations

from datetime import date
from typing import Any, Dict, List

from dbt.adapters.dyntable.delta_log import DataFile, Snapshot
from dbt.adapters.dyntable.dynamic_table.refresh.compact import SMALL_FILE_BYTES, small_files


def snapshot(files: List[Dict[str, Any]]) -> Snapshot:
    data_files = {
        f"part-{i}.parquet": DataFile(
            path=f"part-{i}.parquet",
            uri=f"file:///t/part-{i}.parquet",
            size_bytes=spec["size"],
            num_records=1,
            partition_values=spec.get("partition", {}),
            has_deletion_vector=False,
        )
        for i, spec in enumerate(files)
    }
    return Snapshot(0, "id", '{"type":"struct","fields":[]}', (), {}, data_files)


def test_small_files_are_counted_per_partition():
    files = [{"size": 1_000, "partition": {"day": date(2026, 1, d % 2 + 1)}} for d in range(60)]
    assert small_files(snapshot(files)) == 30
    assert small_files(snapshot([{"size": 1_000}] * 60)) == 60


def test_files_of_the_small_file_size_and_up_are_not_small():
    files = [{"size": SMALL_FILE_BYTES}] * 10 + [{"size": SMALL_FILE_BYTES - 1}] * 3
    assert small_files(snapshot(files)) == 3
    assert small_files(snapshot([])) == 0
