"""What a DT's compaction merges, and when it falls due (docs/ARCHITECTURE.md, "Compaction"):
per partition, a size tier of its small files, so the large files of a first build or a rebuild
are not rewritten with every handful of appended ones."""

from __future__ import annotations

import json
from datetime import date
from typing import Any, Dict, List

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import AddAction

from dbt.adapters.dyntable.delta_log import DataFile, DeltaLog, Snapshot
from dbt.adapters.dyntable.dynamic_table.refresh.compact import (
    COMPACTION_FOLDER,
    MERGED_FILE_BYTES,
    SMALL_FILE_BYTES,
    compaction_groups,
    merge_files,
)

MB = 1024 * 1024


def snapshot(files: List[Dict[str, Any]]) -> Snapshot:
    data_files = {
        f"part-{i:04d}.parquet": DataFile(
            path=f"part-{i:04d}.parquet",
            uri=f"file:///t/part-{i:04d}.parquet",
            size_bytes=spec["size"],
            num_records=1,
            partition_values=spec.get("partition", {}),
        )
        for i, spec in enumerate(files)
    }
    vectors = {f"part-{i:04d}.parquet": np.array([0]) for i, spec in enumerate(files) if spec.get("vector")}
    return Snapshot(0, "id", '{"type":"struct","fields":[]}', (), {}, data_files, vectors)


def sizes(groups: List[List[DataFile]]) -> List[List[int]]:
    return [[f.size_bytes for f in group] for group in groups]


def test_small_files_are_merged_per_partition():
    files = [{"size": 1_000, "partition": {"day": date(2026, 1, d % 2 + 1)}} for d in range(60)]
    groups = compaction_groups(snapshot(files), 30)
    assert sizes(groups) == [[1_000] * 30, [1_000] * 30]
    assert {tuple(f.partition_values.items()) for f in groups[0]} != {
        tuple(f.partition_values.items()) for f in groups[1]
    }
    assert compaction_groups(snapshot(files), 31) == []  # not due: 30 a partition
    assert compaction_groups(snapshot([]), 2) == []


def test_the_large_files_of_a_first_build_are_left_alone():
    # Two 37 and 32 MB files from the first build, 50 appended files of 100 kB.
    files = [{"size": 37 * MB}, {"size": 32 * MB}] + [{"size": 100_000}] * 50
    assert sizes(compaction_groups(snapshot(files), 50)) == [[100_000] * 50]
    # Once the appended files weigh as much as a build file, it joins them.
    files = [{"size": 3 * MB}] + [{"size": 100_000}] * 40
    assert sizes(compaction_groups(snapshot(files), 41)) == [[100_000] * 40 + [3 * MB]]
    assert compaction_groups(snapshot(files[:30]), 41) == []


def test_merged_files_merge_again_as_a_tier():
    # After compactions: merged files of 5 and 10 MB and 50 new appended files of 100 kB.
    files = [{"size": 40 * MB}, {"size": 10_000_000}, {"size": 5_000_000}] + [{"size": 100_000}] * 50
    assert sizes(compaction_groups(snapshot(files), 50)) == [[100_000] * 50 + [5_000_000, 10_000_000]]


def test_a_tiny_file_does_not_stop_a_tier_of_larger_ones():
    files = [{"size": 900}, {"size": 2 * MB}, {"size": 2 * MB}, {"size": 2 * MB}, {"size": 2 * MB}]
    assert sizes(compaction_groups(snapshot(files), 5)) == [[900] + [2 * MB] * 4]


def test_a_tier_stops_at_a_merged_files_size_and_is_due_when_full():
    files = [{"size": 10_000}] + [{"size": 5 * MB}] * 49
    (group,) = compaction_groups(snapshot(files), 50)  # 26 files, but a full merged file
    assert sizes([group]) == [[10_000] + [5 * MB] * 25]
    assert sum(f.size_bytes for f in group) <= MERGED_FILE_BYTES
    files = [{"size": 5 * MB}] * 25  # 125 MB, and nothing more to merge: not full
    assert compaction_groups(snapshot(files), 50) == []
    assert sizes(compaction_groups(snapshot(files * 2), 50)) == [[5 * MB] * 25]
    # The two files of a first build are not merged for weighing as much as a merged file.
    assert compaction_groups(snapshot([{"size": 37 * MB}, {"size": 32 * MB}]), 50) == []


def test_files_of_the_small_file_size_and_up_and_with_deletion_vectors_are_not_merged():
    files = [{"size": SMALL_FILE_BYTES}] * 10 + [{"size": SMALL_FILE_BYTES - 1}] * 2
    assert sizes(compaction_groups(snapshot(files), 2)) == [[SMALL_FILE_BYTES - 1] * 2]
    files = [{"size": 1_000}] * 3 + [{"size": 1_000, "vector": True}] + [{"size": 1_000}] * 5
    (group,) = compaction_groups(snapshot(files), 3)
    assert [f.path for f in group] == [f"part-{i:04d}.parquet" for i in range(4, 9)]


# -- merging a tier in this process, on real Delta tables --------------------------------------------


def delta_table(path, batches, partition_by=None, configuration=None):
    """A Delta table written by deltalake, one commit (one file or more) per batch."""
    for batch in batches:
        write_deltalake(
            str(path), batch, mode="append", partition_by=partition_by, configuration=configuration
        )
    return DeltaTable(str(path))


def rows(path):
    return sorted(DeltaTable(str(path)).to_pyarrow_table().to_pylist(), key=lambda r: sorted(r.items()))


def last_actions(path):
    commit = sorted((path / "_delta_log").glob("*.json"))[-1]
    return [json.loads(line) for line in commit.read_text().splitlines()]


def test_merging_a_tier_keeps_every_row_and_the_large_files(tmp_path):
    table = tmp_path / "dt"
    days = [date(2026, 1, 1), date(2026, 1, 2)]
    build = pa.table({"id": list(range(20_000)), "day": pa.array(days * 10_000, pa.date32())})
    appended = [pa.table({"id": [100_000 + i], "day": pa.array(days[:1], pa.date32())}) for i in range(6)]
    delta_table(table, [build, *appended], partition_by=["day"])
    before = rows(table)
    leftover = table / f"{COMPACTION_FOLDER}crashed"
    leftover.mkdir()
    log = DeltaLog(table)
    snapshot = log.snapshot(log.latest_version())
    groups = compaction_groups(snapshot, 6)
    assert [len(g) for g in groups] == [6]
    assert {f.partition_values["day"] for f in groups[0]} == {date(2026, 1, 1)}

    writer = DeltaTable(str(table))
    assert merge_files(writer, log, groups) == 1
    assert writer.version() == snapshot.version + 1  # at the compaction's version, to checkpoint it
    assert rows(table) == before
    actions = last_actions(table)
    files = [a.get("add") or a.get("remove") for a in actions if "add" in a or "remove" in a]
    assert len(files) == 7 and not any(f["dataChange"] for f in files)
    (add,) = [a["add"] for a in actions if "add" in a]
    assert add["partitionValues"] == {"day": "2026-01-01"} and json.loads(add["stats"])["numRecords"] == 6
    live = DeltaLog(table).snapshot(DeltaLog(table).latest_version()).files
    assert set(snapshot.files) - {f.path for f in groups[0]} < set(live)  # the build's files stay
    assert not leftover.exists() and not list(table.glob(f"{COMPACTION_FOLDER}*"))


def test_a_tier_beyond_the_target_file_size_is_written_as_several_files(tmp_path):
    table = tmp_path / "dt"
    batches = [pa.table({"id": list(range(i * 50_000, (i + 1) * 50_000))}) for i in range(4)]
    delta_table(table, batches, configuration={"delta.targetFileSize": "200000"})
    log = DeltaLog(table)
    groups = [sorted(log.snapshot(log.latest_version()).files.values(), key=lambda f: f.path)]
    before = rows(table)
    added = merge_files(DeltaTable(str(table)), log, groups)
    assert added > 1
    assert len([a for a in last_actions(table) if "add" in a]) == added
    assert rows(table) == before


def test_files_of_no_rows_merge_into_none(tmp_path):
    table = tmp_path / "dt"
    delta_table(table, [pa.table({"id": [1, 2]})])
    empty = pa.table({"id": pa.array([], pa.int64())})
    pq.write_table(empty, table / "empty-0.parquet")
    pq.write_table(empty, table / "empty-1.parquet")
    opened = DeltaTable(str(table))
    opened.create_write_transaction(
        [
            AddAction(
                f"empty-{i}.parquet",
                (table / f"empty-{i}.parquet").stat().st_size,
                {},
                0,
                True,
                '{"numRecords":0}',
            )
            for i in range(2)
        ],
        "append",
        opened.schema(),
    )
    log = DeltaLog(table)
    empties = [f for f in log.snapshot(log.latest_version()).files.values() if f.path.startswith("empty")]
    assert merge_files(DeltaTable(str(table)), log, [empties]) == 0
    assert rows(table) == [{"id": 1}, {"id": 2}]
    assert len(DeltaTable(str(table)).file_uris()) == 1
