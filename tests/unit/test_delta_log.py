"""DeltaLog on real Delta tables written with `deltalake`: versions, time, snapshots, intervals."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Callable, Dict, List, Set, Tuple

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from dbt.adapters.dyntable.delta_log import (
    DataFile,
    DeltaLog,
    HistoryUnavailable,
    IntervalKind,
    TableNotFound,
    commits,
    deltalake_snapshots,
    listing,
    snapshots,
    typed_partition_values,
)
from dbt.adapters.dyntable.delta_log.deltalake_snapshots import DeltalakeSnapshots, snapshot_of
from dbt.adapters.dyntable.delta_log.lru import Lru
from dbt.adapters.dyntable.delta_log.table_files import TableFiles


def rows(ids: List[int], value: str = "x") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([value] * len(ids), pa.string())})


def commit_file(table: Path, version: int) -> Path:
    return table / "_delta_log" / f"{version:020d}.json"


def set_commit_times(table: Path, times_ms: Dict[int, int]) -> None:
    for version, ms in times_ms.items():
        os.utime(commit_file(table, version), ns=(ms * 1_000_000, ms * 1_000_000))


@pytest.fixture
def table(tmp_path: Path) -> Path:
    """Versions: 0 create [1,2,3] | 1 append [4] | 2 append [5,6] | 3 update id=1 | 4 delete id=4."""
    location = tmp_path / "t"
    write_deltalake(location, rows([1, 2, 3]))
    write_deltalake(location, rows([4]), mode="append")
    write_deltalake(location, rows([5, 6]), mode="append")
    DeltaTable(location).update(updates={"v": "'y'"}, predicate="id = 1")
    DeltaTable(location).delete("id = 4")
    return location


# -- versions and time -----------------------------------------------------------------------------


def test_latest_version_follows_commits_and_checkpoints(table: Path) -> None:
    log = DeltaLog(table)
    assert log.latest_version() == 4 == DeltaTable(table).version()
    DeltaTable(table).create_checkpoint()
    write_deltalake(table, rows([7]), mode="append")
    assert log.latest_version() == 5
    assert log.exists()


def test_missing_table(tmp_path: Path) -> None:
    log = DeltaLog(tmp_path / "nothing")
    assert not log.exists()
    with pytest.raises(TableNotFound):
        log.latest_version()
    with pytest.raises(TableNotFound):
        log.version_at(0)


def test_version_at_at_between_and_before_commits(table: Path) -> None:
    set_commit_times(table, {0: 10_000, 1: 20_000, 2: 30_000, 3: 40_000, 4: 50_000})
    log = DeltaLog(table)
    assert log.version_at(9_999) is None  # the table did not exist yet
    assert log.version_at(10_000) == 0
    assert log.version_at(19_999) == 0
    assert log.version_at(20_000) == 1
    assert log.version_at(35_000) == 2
    assert log.version_at(50_000) == 4
    assert log.version_at(10**13) == 4
    assert [log.commit_timestamp(v) for v in range(5)] == [10_000, 20_000, 30_000, 40_000, 50_000]


def test_commit_timestamps_are_made_strictly_increasing(table: Path) -> None:
    # A clock step back on the writer: version 2's file is older than version 1's.
    set_commit_times(table, {0: 10_000, 1: 20_000, 2: 15_000, 3: 40_000, 4: 50_000})
    log = DeltaLog(table)
    assert log.commit_timestamp(2) == 20_001
    assert log.version_at(15_000) == 0  # version 2 cannot precede version 1
    assert log.version_at(20_000) == 1
    assert log.version_at(20_001) == 2


def test_in_commit_timestamps_win_over_file_times(table: Path) -> None:
    for version in range(5):
        path = commit_file(table, version)
        lines = path.read_text().splitlines()
        info = json.loads(lines[0])
        info["commitInfo"]["inCommitTimestamp"] = 1_000 * (version + 1)
        path.write_text("\n".join([json.dumps(info)] + lines[1:]) + "\n")
    set_commit_times(table, {v: 99_000 for v in range(5)})
    log = DeltaLog(table)
    assert [log.commit_timestamp(v) for v in range(5)] == [1_000, 2_000, 3_000, 4_000, 5_000]
    assert log.version_at(3_500) == 2


def test_version_at_before_cleaned_history_raises(table: Path) -> None:
    DeltaTable(table).create_checkpoint()  # at version 4
    for version in range(4):
        commit_file(table, version).unlink()
    set_commit_times(table, {4: 50_000})
    log = DeltaLog(table)
    assert log.version_at(50_000) == 4
    with pytest.raises(HistoryUnavailable):
        log.version_at(40_000)
    with pytest.raises(HistoryUnavailable):
        log.commit_timestamp(2)


def test_commits_before_the_oldest_checkpoint_are_not_loadable(table: Path) -> None:
    DeltaTable(table).create_checkpoint()  # at version 4; versions 1..3 keep their commits
    commit_file(table, 0).unlink()
    set_commit_times(table, {1: 20_000, 2: 30_000, 3: 40_000, 4: 50_000})
    log = DeltaLog(table)
    assert log.commit_timestamp(4) == 50_000
    with pytest.raises(HistoryUnavailable):
        log.commit_timestamp(2)  # its commit is there, but nothing to replay it onto
    with pytest.raises(HistoryUnavailable):
        log.version_at(45_000)


# -- snapshots -------------------------------------------------------------------------------------


def test_snapshot_schema_files_and_stats(table: Path) -> None:
    log = DeltaLog(table)
    schema = log.schema_at(0)
    assert [(f.name, f.dataType.simpleString()) for f in schema.fields] == [("id", "bigint"), ("v", "string")]
    files = log.files_at(2)
    assert sorted(f.num_records for f in files) == [1, 2, 3]
    assert all(f.uri.startswith("file:///") and f.size_bytes > 0 for f in files)
    assert not log.snapshot(2).deleted_rows
    assert log.table_id(0) == log.table_id(4) == DeltaTable(table).metadata().id
    assert log.partition_columns == ()


def test_partition_values_are_typed_and_paths_resolve(tmp_path: Path) -> None:
    location = tmp_path / "p"
    data = pa.table(
        {
            "id": [1, 2, 3],
            "day": [dt.date(2024, 1, 1), dt.date(2024, 1, 2), None],
            "name": ["a b", "c/d%e", "f"],
            "amount": pa.array([Decimal("1.50"), Decimal("2.25"), Decimal("0.00")], pa.decimal128(6, 2)),
        }
    )
    write_deltalake(location, data, partition_by=["day", "name", "amount"])
    log = DeltaLog(location)
    assert log.partition_columns == ("day", "name", "amount")
    values = sorted(
        (tuple(sorted(f.partition_values.items(), key=lambda kv: kv[0])) for f in log.files_at(0)),
        key=repr,
    )
    assert (("amount", Decimal("2.25")), ("day", dt.date(2024, 1, 2)), ("name", "c/d%e")) in values
    assert (("amount", Decimal("0.00")), ("day", None), ("name", "f")) in values
    # Special characters in partition directories do not make live files look vacuumed.
    write_deltalake(location, data.slice(0, 2), mode="append")
    interval = log.interval(0, 1)
    assert interval.differentiable, interval.undifferentiable_reason
    assert interval.kind is IntervalKind.ADDED_ONLY and len(interval.added) == 2


# -- intervals -------------------------------------------------------------------------------------


def test_interval_kinds(table: Path) -> None:
    log = DeltaLog(table)
    assert log.interval(0, 0).kind is IntervalKind.EMPTY
    inserts = log.interval(0, 2)
    assert inserts.kind is IntervalKind.ADDED_ONLY
    assert (inserts.added_rows, inserts.removed_rows, inserts.removed_bytes) == (3, 0, 0)
    assert inserts.added_bytes == sum(f.size_bytes for f in inserts.added) > 0
    update = log.interval(2, 3)
    assert update.kind is IntervalKind.MIXED
    assert (update.added_rows, update.removed_rows) == (3, 3)  # copy-on-write rewrote the file
    delete = log.interval(3, 4)
    assert delete.kind is IntervalKind.REMOVED_ONLY
    assert (delete.added_rows, delete.removed_rows) == (0, 1)
    assert all(i.differentiable for i in (inserts, update, delete))


def test_interval_over_several_commits_cancels_transient_files(table: Path) -> None:
    log = DeltaLog(table)
    whole = log.interval(0, 4)
    live0 = {f.path for f in log.files_at(0)}
    live4 = {f.path for f in log.files_at(4)}
    assert {f.path for f in whole.added} == live4 - live0
    assert {f.path for f in whole.removed} == live0 - live4
    # The file of version 1 (row 4) was added and then removed inside the interval: on neither side.
    (transient,) = {f.path for f in log.files_at(1)} - live0
    assert transient not in {f.path for f in whole.added + whole.removed}
    assert whole.kind is IntervalKind.MIXED and whole.added_rows == 5  # [1 y, 2, 3] and [5, 6]


def test_intervals_count_the_rows_their_commits_changed(table: Path) -> None:
    """AUTO weighs a window's re-sorting by these (docs/ARCHITECTURE.md, "Deciding"): delta-rs's
    metrics here, delta-spark's and Sail's below."""
    log = DeltaLog(table)
    assert log.interval(0, 2).changed_rows == 3  # two appends of 1 and 2 rows
    assert log.interval(2, 3).changed_rows == 2  # an updated row is removed and added
    assert log.interval(2, 4).changed_rows == 3  # and a deleted one removed
    upsert = pa.table({"id": pa.array([2, 9], pa.int64()), "v": ["m", "n"]})
    DeltaTable(table).merge(
        upsert, "t.id = s.id", source_alias="s", target_alias="t"
    ).when_matched_update_all().when_not_matched_insert_all().execute()
    assert DeltaLog(table).interval(4, 5).changed_rows == 3
    DeltaTable(table).optimize.compact()
    assert DeltaLog(table).interval(5, 6).changed_rows == 0
    # an overwrite does not count the rows it removes: unknown, so the whole interval is
    write_deltalake(table, rows([7]), mode="overwrite")
    assert DeltaLog(table).interval(6, 7).changed_rows is None
    assert DeltaLog(table).interval(4, 7).changed_rows is None


@pytest.mark.parametrize(
    "operation, metrics, removes, changed",
    [
        ("WRITE", {"numOutputRows": "120", "numFiles": "1"}, False, 120),  # delta-spark: text
        ("UPDATE", {"numUpdatedRows": 100, "numCopiedRows": 150396, "numOutputRows": 150496}, True, 200),
        ("DELETE", {"numDeletedRows": 100, "numCopiedRows": 150396, "numOutputRows": 150396}, True, 100),
        (
            "MERGE",
            {"numTargetRowsInserted": 4, "numTargetRowsUpdated": 1, "numTargetRowsDeleted": 2},
            True,
            8,
        ),
        ("DELETE", {"numRemovedFiles": "3"}, True, None),  # whole files, rows not counted
        ("WRITE", {}, False, None),
    ],
)
def test_a_commit_counts_its_changed_rows_by_its_writers_metrics(
    operation: str, metrics: Dict[str, object], removes: bool, changed: object
) -> None:
    commit = commits.Commit(
        version=1,
        identity="c",
        commit_info={"operation": operation, "operationMetrics": metrics},
        metadata=None,
        changes_data=True,
        removes_files=removes,
    )
    assert commit.changed_rows == changed


def test_compaction_only_interval_is_empty(table: Path) -> None:
    DeltaTable(table).optimize.compact()
    log = DeltaLog(table)
    compacted = log.interval(4, 5)
    assert compacted.differentiable and compacted.kind is IntervalKind.EMPTY


def paths(files: Tuple[DataFile, ...]) -> Set[str]:
    return {f.path for f in files}


def test_an_interval_across_a_compaction_holds_only_the_data_changes(table: Path) -> None:
    """Versions 5 compact, 6 append [7], 7 compact, 8 delete id=2: what the interval reads is
    what the data commits changed, never the files the compactions rewrote."""
    DeltaTable(table).optimize.compact()
    write_deltalake(table, rows([7]), mode="append")
    DeltaTable(table).optimize.compact()
    DeltaTable(table).delete("id = 2")
    log = DeltaLog(table)
    assert [log.snapshot(v).files.keys() != log.snapshot(v - 1).files.keys() for v in (5, 7)] == [True, True]
    # The delete of version 4 before the compaction: only the file of row 4 is read.
    delete = log.interval(3, 5)
    assert delete.differentiable and delete.kind is IntervalKind.REMOVED_ONLY
    assert paths(delete.removed) == paths(log.interval(3, 4).removed) and delete.removed_rows == 1
    # An append after it: only the appended file, although the compacted one replaced it later.
    (appended,) = paths(log.files_at(6)) - paths(log.files_at(5))
    append = log.interval(5, 7)
    assert append.kind is IntervalKind.ADDED_ONLY and paths(append.added) == {appended}
    assert append.added_rows == 1
    # The delete of version 8 rewrote the compacted file: its rows out, the rewrite's in.
    whole = log.interval(3, 8)
    (rewritten,) = paths(log.files_at(7)) - paths(log.files_at(8))
    assert paths(whole.removed) == paths(delete.removed) | {rewritten}
    assert paths(whole.added) == {appended} | (paths(log.files_at(8)) - paths(log.files_at(7)))
    assert (whole.added_rows, whole.removed_rows) == (1 + 5, 1 + 6)
    # Rows of the interval: the end snapshots' rows, whatever files hold them.
    net: Dict[tuple, int] = {}
    for files, sign in ((whole.added, 1), (whole.removed, -1)):
        for f in files:
            for row in pq.read_table(f.uri).to_pylist():
                key = (row["id"], row["v"])
                net[key] = net.get(key, 0) + sign
    assert {k: n for k, n in net.items() if n} == {(2, "x"): -1, (4, "x"): -1, (7, "x"): 1}


def test_schema_change_is_undifferentiable(table: Path) -> None:
    extra = rows([8]).append_column("w", pa.array([1.0]))
    write_deltalake(table, extra, mode="append", schema_mode="merge")
    log = DeltaLog(table)
    assert log.interval(4, 5).undifferentiable_reason == "schema changed at version 5 (added w)"
    assert "schema changed" in (log.interval(2, 5).undifferentiable_reason or "")
    assert log.interval(2, 4).differentiable


def test_vacuumed_file_is_undifferentiable(table: Path) -> None:
    DeltaTable(table).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    log = DeltaLog(table)
    reason = log.interval(2, 3).undifferentiable_reason  # the update's removed file is gone
    assert reason is not None and "no longer present" in reason
    assert "no longer present" in (log.interval(0, 2).undifferentiable_reason or "")  # row 4's file
    assert log.interval(1, 2).differentiable  # its added file is still live


def test_cleaned_log_is_undifferentiable(table: Path) -> None:
    DeltaTable(table).create_checkpoint()
    commit_file(table, 2).unlink()
    commit_file(table, 1).unlink()
    commit_file(table, 0).unlink()
    log = DeltaLog(table)
    reason = log.interval(1, 4).undifferentiable_reason
    assert reason is not None and "log entries are no longer present" in reason
    assert log.interval(3, 4).undifferentiable_reason is not None  # version 3 needs commits 0..3
    assert log.interval(4, 4).differentiable


def test_recreated_table_is_undifferentiable(table: Path, tmp_path: Path) -> None:
    log = DeltaLog(table)
    old_id = log.table_id(2)
    for path in sorted(table.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    write_deltalake(table, rows([1]))
    write_deltalake(table, rows([2]), mode="append")
    write_deltalake(table, rows([3]), mode="append")
    fresh = DeltaLog(table)
    assert "re-created" in (fresh.interval(1, 2, table_id=old_id).undifferentiable_reason or "")
    assert "re-created" in (fresh.interval(4, 2).undifferentiable_reason or "")
    assert fresh.interval(1, 2, table_id=fresh.table_id(1)).differentiable


@pytest.mark.parametrize("removed", [True, False], ids=["vector_file_gone", "no_remove"])
def test_an_unreadable_deletion_vector_is_undifferentiable(table: Path, removed: bool) -> None:
    """A commit crafted the way Delta writers record a vector (the file removed and re-added under
    the same path with one) on a table without the deletionVectors feature: the vector cannot be
    read, so the rows it masks are unknown. So too where the commit re-adds the file with a vector
    without removing it first, which would leave unknown the vector it had before."""
    live = DeltaLog(table).files_at(4)[0]
    vector = {
        "storageType": "u",
        "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
        "offset": 1,
        "sizeInBytes": 36,
        "cardinality": 1,
    }
    actions = [
        {"commitInfo": {"timestamp": 1, "operation": "DELETE"}},
        {"remove": {"path": live.path, "dataChange": True, "deletionTimestamp": 1, "size": live.size_bytes}},
        {
            "add": {
                "path": live.path,
                "partitionValues": {},
                "size": live.size_bytes,
                "modificationTime": 1,
                "dataChange": True,
                "deletionVector": vector,
            }
        },
    ]
    if not removed:
        del actions[1]
    commit_file(table, 5).write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    reason = DeltaLog(table).interval(3, 5).undifferentiable_reason
    why = "is gone" if removed else "without a remove naming the one before"
    assert reason is not None and f"the deletion vector of {live.path} by version 5 cannot be read" in reason
    assert why in reason


def test_interval_argument_checks(table: Path) -> None:
    log = DeltaLog(table)
    with pytest.raises(ValueError):
        log.interval(-1, 2)
    with pytest.raises(ValueError):
        log.interval(2, 9)


def test_change_data_feed_coverage(tmp_path: Path) -> None:
    location = tmp_path / "cdf"
    write_deltalake(location, rows([1]), configuration={"delta.enableChangeDataFeed": "true"})
    write_deltalake(location, rows([2]), mode="append")
    DeltaTable(location).alter.set_table_properties({"delta.enableChangeDataFeed": "false"})
    write_deltalake(location, rows([3]), mode="append")
    log = DeltaLog(location)
    assert log.change_data_feed_covers(0, 1)
    assert not log.change_data_feed_covers(0, 2)
    assert not log.change_data_feed_covers(2, 3)


def test_snapshots_shared_across_instances_follow_a_re_created_table(tmp_path: Path) -> None:
    location = tmp_path / "t"
    write_deltalake(location, rows([1, 2]))
    first = DeltaLog(location).snapshot(0)
    assert DeltaLog(location).snapshot(0) is first  # another instance reuses the loaded snapshot
    shutil.rmtree(location)
    write_deltalake(location, pa.table({"id": pa.array([7], pa.int64())}))
    again = DeltaLog(location).snapshot(0)
    assert again.table_id != first.table_id
    assert [f.name for f in again.schema.fields] == ["id"]


def backdate_log_folder(table: Path) -> None:
    """Make ``_delta_log`` look untouched for a minute: its listing may then be reused."""
    folder = table / "_delta_log"
    then = folder.stat().st_mtime_ns - 60_000_000_000
    os.utime(folder, ns=(then, then))


def test_a_reused_listing_follows_commits_cleanups_and_re_creation(table: Path) -> None:
    backdate_log_folder(table)
    log = DeltaLog(table)
    assert log.latest_version() == 4 == DeltaLog(table).latest_version()
    write_deltalake(table, rows([7]), mode="append")  # a commit changes the folder
    assert log.latest_version() == 5 == DeltaLog(table).latest_version()
    backdate_log_folder(table)
    assert DeltaLog(table).version_at(10**15) == 5
    DeltaLog(table).commit_timestamp(0)
    commit_file(table, 0).unlink()  # the log cleaned up
    with pytest.raises(HistoryUnavailable):
        DeltaLog(table).commit_timestamp(0)
    shutil.rmtree(table)  # dropped and re-created: a new folder
    write_deltalake(table, rows([1]))
    backdate_log_folder(table)
    assert DeltaLog(table).latest_version() == 0


def test_a_recent_listing_is_reused_until_a_commit_or_checkpoint_follows_it(
    table: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder changed too recently for its modification time to prove it unchanged (the DT a
    refresh writes): its listing is reused while no commit follows it and ``_last_checkpoint``
    is the same, though a change within one tick of a coarse clock leaves the folder's time as
    it was, as this test makes it."""
    monkeypatch.setattr(listing, "LISTING_RACY_NS", 10**18)  # every folder is recent
    folder = table / "_delta_log"

    def in_the_same_tick(change: Callable[[], object]) -> None:
        before = folder.stat()
        change()
        os.utime(folder, ns=(before.st_atime_ns, before.st_mtime_ns))

    listed = DeltaLog(table)._listing.get()
    assert DeltaLog(table)._listing.get() is listed and DeltaLog(table).latest_version() == 4
    in_the_same_tick(lambda: write_deltalake(table, rows([7]), mode="append"))
    assert DeltaLog(table).latest_version() == 5
    relisted = DeltaLog(table)._listing.get()
    assert relisted is not listed and DeltaLog(table)._listing.get() is relisted
    in_the_same_tick(lambda: DeltaTable(table).create_checkpoint())
    assert DeltaLog(table).latest_checkpoint() == 5


def test_a_listing_is_extended_by_the_commits_after_it_until_a_checkpoint_or_cleanup(
    table: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log that only gained commits is not listed again: a few stats extend its listing, which
    then says what a new listing would. A checkpoint or a cleanup lists it again."""
    listings: List[str] = []
    selector = pafs.FileSelector

    def counted(folder: str, *args: object, **kwargs: object) -> pafs.FileSelector:
        listings.append(folder)
        return selector(folder, *args, **kwargs)

    monkeypatch.setattr(pafs, "FileSelector", counted)

    def fresh() -> listing.Listing:
        listing._listings.pop(str(table / "_delta_log"))
        return DeltaLog(table)._listing.get()

    assert DeltaLog(table).latest_version() == 4 and len(listings) == 1
    for value in (7, 8, 9):
        write_deltalake(table, rows([value]), mode="append")
    extended = DeltaLog(table)._listing.get()
    assert extended.latest == 7 and len(listings) == 1
    assert extended == fresh() and len(listings) == 2
    DeltaTable(table).create_checkpoint()
    write_deltalake(table, rows([10]), mode="append")
    assert DeltaLog(table).latest_checkpoint() == 7 and len(listings) == 3
    commit_file(table, 0).unlink()  # the log cleaned up by hand: no new checkpoint
    assert DeltaLog(table)._listing.get().earliest_loadable == 7 and len(listings) == 4


def test_a_table_re_created_in_the_same_log_folder_is_listed_again(table: Path) -> None:
    """Its commits up to the listing's latest were written anew: not an extension of it."""
    listed = DeltaLog(table)._listing.get()
    for path in (table / "_delta_log").iterdir():
        path.unlink()
    for value in range(5):
        write_deltalake(table, rows([value]), mode="append")
    relisted = DeltaLog(table)._listing.get()
    assert relisted.latest == listed.latest == 4
    assert relisted.commit_mtimes_ms != listed.commit_mtimes_ms
    listing._listings.pop(str(table / "_delta_log"))
    assert DeltaLog(table)._listing.get() == relisted


def test_an_open_log_follows_a_table_re_created_under_it(table: Path) -> None:
    """An instance that loaded a version of a table then dropped and re-created in its folder,
    up to the same version (a partitioned DT replaced on the embedded engine), answers for the
    new table: its snapshots, commits and times, not the ones it cached."""
    set_commit_times(table, {v: 1_000_000 + v for v in range(5)})
    log = DeltaLog(table)
    assert log.latest_version() == 4 and log.row_count(4) == 5
    old_commit, old_id, old_time = log.commit_id(4), log.table_id(4), log.commit_timestamp(4)
    shutil.rmtree(table)
    for value in range(5):
        write_deltalake(table, rows([value, value + 10]), mode="append")
    assert log.latest_version() == 4 and log.row_count(4) == 10
    assert log.commit_id(4) != old_commit and log.table_id(4) != old_id
    assert log.commit_timestamp(4) != old_time
    assert log.interval(0, 4).added_rows == 8


def test_a_held_listing_answers_as_of_when_it_was_taken(table: Path) -> None:
    held = DeltaLog(table).hold_listing()
    write_deltalake(table, rows([7]), mode="append")
    assert held.latest_version() == 4 and held.version_at(10**15) == 4
    assert DeltaLog(table).latest_version() == 5


def test_reused_listings_are_bounded_least_recently_used_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(listing, "_listings", Lru(2))
    folders = {}
    for name in ("a", "b", "c"):
        write_deltalake(tmp_path / name, rows([1]))
        backdate_log_folder(tmp_path / name)
        folders[name] = str(tmp_path / name / "_delta_log")
    DeltaLog(tmp_path / "a").latest_version()
    DeltaLog(tmp_path / "b").latest_version()
    DeltaLog(tmp_path / "a").latest_version()  # a reused: b is now the least recently used
    DeltaLog(tmp_path / "c").latest_version()
    assert list(listing._listings) == [folders["a"], folders["c"]]


def test_a_later_version_replayed_from_a_loaded_one_equals_a_fresh_load(
    table: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deltalake_snapshots, "_replay_bases", Lru(deltalake_snapshots.REPLAY_BASE_CACHE_SIZE))
    monkeypatch.setattr(snapshots, "_shared_snapshots", Lru(snapshots.SHARED_SNAPSHOT_CACHE_SIZE))
    replays: List[int] = []
    replay = DeltaTable.load_as_version
    monkeypatch.setattr(DeltaTable, "load_as_version", lambda t, v: replays.append(v) or replay(t, v))
    DeltaLog(table).snapshot(1)  # the base every later version is replayed from
    added_column = pa.table({"id": pa.array([8], pa.int64()), "v": ["z"], "w": [1.5]})
    write_deltalake(table, added_column, mode="append", schema_mode="merge")
    for version in (3, 4, 5):
        replayed = DeltaLog(table).snapshot(version)
        fresh = snapshot_of(DeltaTable(str(table), version=version), version, TableFiles(table))
        assert replayed == fresh
    # 3 and 4 only add and remove files: applied to the snapshot before them (tests below); 5
    # adds a column: replayed from version 1's table.
    assert replays == [5]
    assert [f.name for f in DeltaLog(table).snapshot(5).schema.fields] == ["id", "v", "w"]
    shutil.rmtree(table)  # re-created with more versions than the base: never replayed onto
    for batch in ([1], [2], [3], [4], [5], [6], [7]):
        write_deltalake(table, rows(batch, "new"), mode="append")
    assert DeltaLog(table).snapshot(6) == snapshot_of(DeltaTable(str(table), version=6), 6, TableFiles(table))
    assert DeltaLog(table).row_count(6) == 7
    assert replays == [5]  # the re-created table's version 6 was loaded afresh


def test_a_table_written_here_is_the_next_snapshot_s_base(
    table: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deltalake_snapshots, "_replay_bases", Lru(deltalake_snapshots.REPLAY_BASE_CACHE_SIZE))
    monkeypatch.setattr(snapshots, "_shared_snapshots", Lru(snapshots.SHARED_SNAPSHOT_CACHE_SIZE))
    log = DeltaLog(table)
    log.snapshot(4)
    writer = log.for_writing()
    assert log.for_writing() is not writer  # taken: nobody else moves it meanwhile
    writer.merge(rows([2, 9], "m"), "t.id = s.id", source_alias="s", target_alias="t").when_matched_update(
        {"v": "s.v"}
    ).when_not_matched_insert({"id": "s.id", "v": "s.v"}).execute()
    log.written(writer)
    assert log.for_writing() is writer  # the written table, at the version it committed
    log.written(writer)
    assert DeltaLog(table).snapshot(5) == snapshot_of(DeltaTable(str(table)), 5, TableFiles(table))
    assert DeltaLog(table).row_count(5) == 6  # 1, 2 (updated), 3, 5, 6 and 9


@pytest.fixture
def loaded(monkeypatch: pytest.MonkeyPatch) -> List[Tuple[str, int]]:
    """Each snapshot loaded by ``deltalake`` from here on, as (table folder, version); none is
    shared from earlier tests."""
    monkeypatch.setattr(snapshots, "_shared_snapshots", Lru(snapshots.SHARED_SNAPSHOT_CACHE_SIZE))
    loads: List[Tuple[str, int]] = []
    load = DeltalakeSnapshots.load
    monkeypatch.setattr(
        DeltalakeSnapshots, "load", lambda log, v: loads.append((Path(log.location).name, v)) or load(log, v)
    )
    return loads


def test_a_version_applied_onto_an_earlier_snapshot_equals_a_fresh_load(
    table: Path, loaded: List[Tuple[str, int]]
) -> None:
    """Commits that only add and remove files (appends, updates, deletes, compactions) are applied
    to the snapshot before them; a commit that changes the schema is loaded by ``deltalake``
    instead."""
    DeltaTable(table).optimize.compact()  # 5
    write_deltalake(table, rows([7, 8]), mode="append")  # 6
    DeltaTable(table).update(updates={"v": "'z'"}, predicate="id = 7")  # 7
    write_deltalake(table, rows([9]), mode="append", schema_mode="merge")  # 8
    added_column = pa.table({"id": pa.array([10], pa.int64()), "v": ["w"], "w": [1.5]})
    write_deltalake(table, added_column, mode="append", schema_mode="merge")  # 9: metadata
    write_deltalake(table, added_column, mode="append")  # 10
    log = DeltaLog(table)
    log.snapshot(0)
    for version in range(1, 11):
        fresh = snapshot_of(DeltaTable(str(table), version=version), version, TableFiles(table))
        assert log.snapshot(version) == fresh
    assert loaded == [("t", 0), ("t", 9)]
    assert log.row_count(10) == 10 and log.interval(9, 10).added_rows == 1


def test_a_version_asked_of_a_fresh_log_is_applied_onto_the_snapshot_the_process_used_last(
    table: Path, loaded: List[Tuple[str, int]]
) -> None:
    """Each refresh opens its DT's log afresh and asks it for the version its own commit made:
    that version is built from the snapshot another instance built before, not loaded, unless
    the table was re-created meanwhile."""
    DeltaLog(table).snapshot(4)
    write_deltalake(table, rows([7]), mode="append")  # 5
    DeltaTable(table).delete("id = 7")  # 6
    for version in (5, 6):
        fresh = snapshot_of(DeltaTable(str(table), version=version), version, TableFiles(table))
        assert DeltaLog(table).snapshot(version) == fresh
    assert loaded == [("t", 4)]
    shutil.rmtree(table)  # re-created: its version 7 does not continue version 6
    for batch in ([1], [2], [3], [4], [5], [6], [7], [8]):
        write_deltalake(table, rows(batch, "new"), mode="append")
    assert DeltaLog(table).row_count(7) == 8
    assert loaded == [("t", 4), ("t", 7)]


def partitioned_rows(ids: List[int]) -> pa.Table:
    """Rows with a partition column of each type ``Snapshots._applied`` types, nulls included."""

    def every_third(values: List[object]) -> List[object]:
        return [None if i % 3 == 2 else values[i % len(values)] for i in ids]

    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "day": pa.array(every_third([dt.date(2026, 1, 31), dt.date(1999, 12, 1)]), pa.date32()),
            "country": pa.array(every_third(["GB", "a b/c=d%"]), pa.string()),
            "small": pa.array(every_third([-5, 7]), pa.int16()),
            "big": pa.array(every_third([10**12, -1]), pa.int64()),
            "flag": pa.array(every_third([True, False]), pa.bool_()),
            "ratio": pa.array(every_third([0.1, -2.5]), pa.float32()),
            "price": pa.array(every_third([Decimal("12.50"), Decimal("0.07")]), pa.decimal128(10, 2)),
        }
    )


def test_a_partitioned_version_applied_onto_an_earlier_snapshot_equals_a_fresh_load(
    tmp_path: Path, loaded: List[Tuple[str, int]]
) -> None:
    """A partitioned table's added files carry their partition values as strings: applied, they
    are typed as ``deltalake`` types them, for every type but timestamps and binary, which are
    loaded by ``deltalake`` instead."""
    partitioned = tmp_path / "partitioned"
    columns = ["day", "country", "small", "big", "flag", "ratio", "price"]
    write_deltalake(partitioned, partitioned_rows([0, 1, 2]), partition_by=columns)  # 0
    write_deltalake(partitioned, partitioned_rows([3, 4, 5, 6]), mode="append")  # 1
    DeltaTable(partitioned).update(updates={"id": "id + 100"}, predicate="id = 4")  # 2
    DeltaTable(partitioned).delete("id = 0")  # 3
    DeltaTable(partitioned).optimize.compact()  # 4
    log = DeltaLog(partitioned)
    log.snapshot(0)
    for version in range(1, 5):
        fresh = snapshot_of(DeltaTable(str(partitioned), version=version), version, TableFiles(partitioned))
        assert log.snapshot(version) == fresh
    assert loaded == [("partitioned", 0)]
    day = {f.partition_values["day"] for f in log.snapshot(4).files.values()}
    assert day == {dt.date(2026, 1, 31), dt.date(1999, 12, 1), None}

    by_time = tmp_path / "by_time"
    moment = dt.datetime(2026, 1, 31, 12, 30, tzinfo=dt.timezone.utc)
    write_deltalake(by_time, pa.table({"id": [1], "at": [moment]}), partition_by=["at"])
    write_deltalake(by_time, pa.table({"id": [2], "at": [moment]}), mode="append")
    log = DeltaLog(by_time)
    log.snapshot(0)
    assert log.snapshot(1) == snapshot_of(DeltaTable(str(by_time), version=1), 1, TableFiles(by_time))
    assert loaded[-2:] == [("by_time", 0), ("by_time", 1)]


def test_partition_values_are_typed_only_when_each_parses() -> None:
    """A value that does not parse as its column's type, or an empty one, leaves the typing to
    ``deltalake``."""
    from pyspark.sql.types import DateType, IntegerType, StringType, StructField, StructType

    schema = StructType(
        [StructField("day", DateType()), StructField("n", IntegerType()), StructField("s", StringType())]
    )
    columns = ("day", "n", "s")
    assert typed_partition_values(schema, columns, [{"day": "2026-01-31", "n": "-3", "s": "x"}, {}]) == [
        {"day": dt.date(2026, 1, 31), "n": -3, "s": "x"},
        {"day": None, "n": None, "s": None},
    ]
    assert typed_partition_values(schema, columns, [{"n": "1.5"}]) is None
    assert typed_partition_values(schema, columns, [{"day": "2026-13-01"}]) is None
    assert typed_partition_values(schema, columns, [{"s": ""}]) is None
    assert typed_partition_values(schema, (), [{}, {}]) == [{}, {}]
