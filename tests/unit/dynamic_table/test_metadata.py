"""The metadata tables stay small and right however many refreshes they record (real Delta tables)."""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import List

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.table import TableFeatures

from dbt.adapters.dyntable.dynamic_table import metadata
from dbt.adapters.dyntable.dynamic_table.claims import Claim
from dbt.adapters.dyntable.dynamic_table.lifecycle import Action, State, Trigger
from dbt.adapters.dyntable.dynamic_table.locking import ExclusiveLock
from dbt.adapters.dyntable.dynamic_table.metadata import (
    COMPACT_EVERY,
    FRONTIERS,
    LOG_SETTINGS,
    REFRESH_HISTORY,
    SCHEMAS,
    HistoryRow,
    Intent,
    MetadataDamaged,
    MetadataStore,
    SourceVersion,
    compaction,
    utcnow,
)


def intent(version: int) -> Intent:
    return Intent(
        "r",
        utcnow(),
        {"s.t": SourceVersion(version, f"c{version}")},
        3,
        "h",
        "auto",
        "sql",
        Action.INCREMENTAL,
    )


def test_frontiers_keep_one_row_per_table_after_compaction(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path / "meta", "meta")
    store.ensure()
    for version in range(2 * COMPACT_EVERY):
        for name in ("s.a", "s.b"):
            store.commit_intent(name, intent(version), version, f"d{version}")
    rows = DeltaTable(str(store.location(FRONTIERS))).to_pyarrow_table().num_rows
    assert rows < 2 * COMPACT_EVERY  # superseded rows were dropped at the last compaction
    fresh = MetadataStore(tmp_path / "meta", "meta").frontiers()
    assert {name: f.dt_version for name, f in fresh.items()} == {
        "s.a": 2 * COMPACT_EVERY - 1,
        "s.b": 2 * COMPACT_EVERY - 1,
    }
    assert fresh["s.a"].sources == {"s.t": SourceVersion(2 * COMPACT_EVERY - 1, f"c{2 * COMPACT_EVERY - 1}")}
    # What the next compaction keeps: the latest rows.
    store._compaction.prune_frontiers(store._tables._open[FRONTIERS])
    kept = DeltaTable(str(store.location(FRONTIERS))).to_pyarrow_table().to_pylist()
    assert sorted((row["name"], row["dt_version"]) for row in kept) == [
        ("s.a", 2 * COMPACT_EVERY - 1),
        ("s.b", 2 * COMPACT_EVERY - 1),
    ]


def test_a_compaction_due_inside_a_batch_runs_at_its_end(tmp_path: Path) -> None:
    """Compacting takes several commits' time: inside a batch (a dbt invocation, a runner tick) it
    waits for the batch's end rather than landing on the refresh that made the due commit."""
    store = MetadataStore(tmp_path / "meta", "meta")
    store.ensure()

    def files() -> int:
        return len(DeltaTable(str(store.location(FRONTIERS))).file_uris())

    last = SourceVersion(COMPACT_EVERY + 1, f"c{COMPACT_EVERY + 1}")
    with store.batch():
        for version in range(COMPACT_EVERY + 2):
            store.record_intent("s.a", None, intent(version))  # an intent is written at once
        assert DeltaTable(str(store.location(FRONTIERS))).version() > COMPACT_EVERY
        assert files() == COMPACT_EVERY + 2  # a file per commit, none compacted yet
        assert store.frontier("s.a").pending.sources == {"s.t": last}  # type: ignore[union-attr]
    assert files() == 1  # compacted when the batch ended: the superseded rows dropped
    fresh = MetadataStore(tmp_path / "meta", "meta").frontier("s.a")
    assert fresh is not None and fresh.pending is not None and fresh.pending.sources == {"s.t": last}


def test_the_frontier_a_refresh_reaches_inside_a_batch_is_written_at_its_end(tmp_path: Path) -> None:
    """Inside a batch the frontier a refresh reached waits in memory, read by this process's
    later refreshes, and is written at the batch's end in one commit with the others. A frontier
    another process writes meanwhile is newer and stays the DT's; a DT forgotten meanwhile stays
    forgotten."""
    store = MetadataStore(tmp_path / "meta", "meta")
    store.ensure()
    store.commit_intent("s.a", intent(1), 1, "d1")  # outside a batch: written at once
    other = MetadataStore(tmp_path / "meta", "meta")  # another process
    written = DeltaTable(str(store.location(FRONTIERS))).version()
    with store.batch():
        for name in ("s.a", "s.b", "s.c", "s.d"):
            store.commit_intent(name, intent(2), 2, "d2")
        assert DeltaTable(str(store.location(FRONTIERS))).version() == written  # nothing written yet
        assert {n: f.dt_version for n, f in store.frontiers().items()} == {
            "s.a": 2,
            "s.b": 2,
            "s.c": 2,
            "s.d": 2,
        }
        assert other.frontier("s.a").dt_version == 1  # type: ignore[union-attr]
        other.commit_intent("s.b", intent(3), 3, "d3")  # the other process refreshed s.b since
        store.forget("s.c")
    # The other process's commit, then the batch's one (s.c had no row written to delete).
    assert DeltaTable(str(store.location(FRONTIERS))).version() == written + 2
    fresh = MetadataStore(tmp_path / "meta", "meta").frontiers()
    assert {n: f.dt_version for n, f in fresh.items()} == {"s.a": 2, "s.b": 3, "s.d": 2}


def test_a_frontier_being_written_at_a_batch_s_end_is_read_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner's ticks overlap: one may read a DT's frontier while another tick's end writes
    it. It reads the frontier its refresh reached, never the one before it."""
    store = MetadataStore(tmp_path / "meta", "meta")
    store.ensure()
    store.commit_intent("s.a", intent(1), 1, "d1")
    read_meanwhile: List[int] = []
    append = store._access.append

    def append_and_read(table: str, records: List[dict]) -> None:
        if table == FRONTIERS:
            read_meanwhile.append(store.frontier("s.a").dt_version)  # type: ignore[union-attr]
        append(table, records)
        if table == FRONTIERS:
            read_meanwhile.append(store.frontier("s.a").dt_version)  # type: ignore[union-attr]

    monkeypatch.setattr(store._access, "append", append_and_read)
    store.open_batch()  # a tick still running
    with store.batch():  # a tick that ends
        store.commit_intent("s.a", intent(2), 2, "d2")
    assert read_meanwhile == [2, 2]
    assert store._batches._pending_frontiers == {}
    store.close_batch()


def test_history_rows_being_written_at_a_batch_s_end_are_read_meanwhile_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A consistent read (snapshot.py) may ask for a DT's history while a tick's end writes it:
    it reads each row the batch recorded, once, before, during and after the write."""
    store = MetadataStore(tmp_path / "meta", "meta")
    store.ensure()
    read_meanwhile: List[List[str]] = []
    append = store._access.append

    def append_and_read(table: str, records: List[dict]) -> None:
        if table == REFRESH_HISTORY:
            read_meanwhile.append([row.refresh_id for row in store.history("s.a")])
        append(table, records)
        if table == REFRESH_HISTORY:
            read_meanwhile.append([row.refresh_id for row in store.history("s.a")])

    monkeypatch.setattr(store._access, "append", append_and_read)
    store.open_batch()  # a tick still running
    with store.batch():  # a tick that ends
        for refresh_id in ("r1", "r2"):
            when = utcnow()
            store.append_history(
                HistoryRow(
                    "s.a", refresh_id, when, State.SUCCEEDED, Action.NO_DATA, Trigger.SCHEDULED, when, when
                )
            )
    assert read_meanwhile == [["r1", "r2"], ["r1", "r2"]]
    assert store._batches._flushing_history == [] and store._batches._pending_history == []
    store.close_batch()
    assert [row.refresh_id for row in MetadataStore(tmp_path / "meta", "meta").history("s.a")] == ["r1", "r2"]


def test_overlapping_batches_compact_when_either_ends(tmp_path: Path) -> None:
    """The runner's ticks overlap, each a batch: a compaction due waits for the end of one, not
    for a moment when none is open (there may be none)."""
    store = MetadataStore(tmp_path / "meta", "meta")
    store.ensure()
    store.open_batch()  # a tick still running
    with store.batch():  # a tick that ends
        for version in range(COMPACT_EVERY + 2):
            store.record_intent("s.a", None, intent(version))
    assert len(DeltaTable(str(store.location(FRONTIERS))).file_uris()) == 1
    store.close_batch()


def test_refresh_history_older_than_the_retention_is_dropped(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path / "meta", "meta", history_retention_days=7)
    store.ensure()
    old, now = utcnow() - timedelta(days=8), utcnow()
    for i in range(COMPACT_EVERY):
        when = old if i < 5 else now
        store.append_history(
            HistoryRow("s.a", str(i), when, State.SUCCEEDED, Action.NO_DATA, Trigger.SCHEDULED, when, when)
        )
    kept = MetadataStore(tmp_path / "meta", "meta").history("s.a")
    assert len(kept) == COMPACT_EVERY - 5 and all(
        row.refresh_start_time >= now - timedelta(days=7) for row in kept
    )


def log_entries(store: MetadataStore, table: str) -> int:
    return len(list((Path(store.location(table)) / "_delta_log").glob("*.json")))


@pytest.mark.slow
def test_the_log_of_a_metadata_table_stays_bounded(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path / "meta", "meta")
    store.ensure()
    for version in range(300):
        store.commit_intent("s.a", intent(version), version, f"d{version}")
    assert DeltaTable(str(store.location(FRONTIERS))).version() >= 300
    # A checkpoint every LOG_SETTINGS' interval, and the commits before it removed.
    assert log_entries(store, FRONTIERS) <= int(LOG_SETTINGS["delta.checkpointInterval"]) + 1
    fresh = MetadataStore(tmp_path / "meta", "meta").frontier("s.a")
    assert fresh is not None and fresh.dt_version == 299


def test_a_metadata_table_made_by_an_older_version_gets_the_log_settings(tmp_path: Path) -> None:
    location = tmp_path / "meta" / FRONTIERS
    location.mkdir(parents=True)
    DeltaTable.create(str(location), schema=SCHEMAS[FRONTIERS])
    assert "delta.logRetentionDuration" not in DeltaTable(str(location)).metadata().configuration
    MetadataStore(tmp_path / "meta", "meta").ensure()
    assert DeltaTable(str(location)).metadata().configuration == LOG_SETTINGS


def test_files_compaction_removed_are_deleted_after_the_retention(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each commit writes a small file and compaction merges them: the merged-away files go with
    the vacuum that follows, once removed longer than the retention (here: at once)."""
    monkeypatch.setattr(compaction, "VACUUM_RETENTION_HOURS", 0)
    store = MetadataStore(tmp_path / "meta", "meta")
    store.ensure()
    for version in range(4 * COMPACT_EVERY):
        store.commit_intent("s.a", intent(version), version, f"d{version}")
    table = DeltaTable(str(store.location(FRONTIERS)))
    on_disk = list(Path(store.location(FRONTIERS)).glob("*.parquet"))
    # the live files, and at most those written since the last compaction's vacuum
    assert len(on_disk) <= len(table.file_uris()) + COMPACT_EVERY
    fresh = MetadataStore(tmp_path / "meta", "meta").frontier("s.a")
    assert fresh is not None and fresh.dt_version == 4 * COMPACT_EVERY - 1


def test_a_table_another_process_compacts_is_left_to_it(tmp_path: Path) -> None:
    """deltalake commits two OPTIMIZEs of the same files one after the other, and the second adds
    every row again: a process compacts a table only under its compaction lock, from the latest
    version; one finding the lock held leaves the table as it is."""
    store, other = MetadataStore(tmp_path / "meta", "meta"), MetadataStore(tmp_path / "meta", "meta")
    store.ensure()
    for number in range(COMPACT_EVERY - 1):
        store.append_history(history_row(f"r{number}"))
    before = DeltaTable(str(store.location(REFRESH_HISTORY))).version()
    with ExclusiveLock(other.locks, f"{REFRESH_HISTORY}.compaction"):  # the other process compacts
        store._compaction.compact(REFRESH_HISTORY)
        assert DeltaTable(str(store.location(REFRESH_HISTORY))).version() == before
    with store.one_look():
        store.history()  # read as of the version before the other's compaction
        other._compaction.compact(REFRESH_HISTORY)
        store._compaction.compact(REFRESH_HISTORY)  # from the latest version: nothing left
    table = DeltaTable(str(store.location(REFRESH_HISTORY)))
    assert len(table.file_uris()) == 1 and table.version() == before + 1
    assert sorted(r.refresh_id for r in store.history()) == sorted(f"r{n}" for n in range(COMPACT_EVERY - 1))


def test_inside_one_look_a_table_is_read_as_of_its_first_read(tmp_path: Path) -> None:
    """A refresh checks each table for other writers' commits once: another process's frontier
    written meanwhile shows after it, and a write inside starts from the latest version."""
    store, other = MetadataStore(tmp_path / "meta", "meta"), MetadataStore(tmp_path / "meta", "meta")
    store.ensure()
    store.commit_intent("s.a", intent(1), 1, "d1")
    with store.one_look():
        assert set(store.frontiers()) == {"s.a"}
        other.commit_intent("s.b", intent(2), 2, "d2")
        assert set(store.frontiers()) == {"s.a"}  # as of the first read
        store.commit_intent("s.c", intent(3), 3, "d3")  # written after other's commit, not over it
        assert set(store.frontiers()) == {"s.a", "s.b", "s.c"}
    other.commit_intent("s.d", intent(4), 4, "d4")
    assert set(store.frontiers()) == {"s.a", "s.b", "s.c", "s.d"}


def test_a_table_restored_from_an_older_backup_is_read_and_written_afresh(tmp_path: Path) -> None:
    """A process holding the frontier table open while its folder is restored from an older
    backup (whose log ends before the version it read, and past a checkpoint written since)
    reads the restored rows and writes after them."""
    store = MetadataStore(tmp_path / "meta", "meta")
    store.ensure()
    store.commit_intent("s.a", intent(1), 1, "d1")
    backup = tmp_path / "backup"
    shutil.copytree(store.location(FRONTIERS), backup)
    interval = int(LOG_SETTINGS["delta.checkpointInterval"])
    for version in range(2, 2 + interval):
        store.commit_intent("s.b", intent(version), version, f"d{version}")
    assert set(store.frontiers()) == {"s.a", "s.b"}
    shutil.rmtree(store.location(FRONTIERS))
    shutil.copytree(backup, store.location(FRONTIERS))
    assert set(store.frontiers()) == {"s.a"}
    store.commit_intent("s.c", intent(3), 3, "d3")
    assert set(MetadataStore(tmp_path / "meta", "meta").frontiers()) == {"s.a", "s.c"}


def test_rows_written_before_a_column_existed_read_it_as_null(tmp_path: Path) -> None:
    location = tmp_path / "meta" / FRONTIERS
    location.mkdir(parents=True)
    older = pa.schema([f for f in SCHEMAS[FRONTIERS] if f.name != "views"])
    row = {name: None for name in older.names}
    row.update(name="s.a", data_timestamp=utcnow(), source_versions="{}", sources="{}", dt_version=4)
    row.update(
        dt_commit="c4", definition_hash="h", refresh_mode="auto", definition="sql", updated_at=utcnow()
    )
    write_deltalake(location, pa.Table.from_pylist([row], schema=older))
    store = MetadataStore(tmp_path / "meta", "meta")
    store.ensure()  # adds the missing column
    read = store.frontier("s.a")
    assert read is not None and read.dt_version == 4 and read.views is None


def test_a_table_moved_to_a_higher_reader_protocol_is_never_read_as_plain_files(tmp_path: Path) -> None:
    """Deletion vectors would hide rows of its files: deltalake reads it or says why it cannot."""
    store = MetadataStore(tmp_path / "meta", "meta")
    store.ensure()
    store.commit_intent("s.a", intent(7), 7, "d7")
    DeltaTable(str(store.location(FRONTIERS))).alter.add_feature(
        TableFeatures.DeletionVectors, allow_protocol_versions_increase=True
    )
    with pytest.raises(MetadataDamaged, match="deletionVectors.*dyntable repair"):
        MetadataStore(tmp_path / "meta", "meta").frontier("s.a")


def test_a_prefetched_store_serves_what_was_committed_after_its_prefetch(tmp_path: Path) -> None:
    """``prefetch`` opens the tables and reads the frontiers and graph rows ahead of the first
    refresh; a commit another process makes after it is still what the refresh reads."""
    writer = MetadataStore(tmp_path / "meta", "meta")
    writer.ensure()
    writer.commit_intent("s.a", intent(1), 1, "d1")
    reader = MetadataStore(tmp_path / "meta", "meta")
    reader.prefetch()
    assert set(reader._tables._open) == set(SCHEMAS)
    assert set(reader._tables._cached) == set(metadata.CACHED_TABLES)
    writer.commit_intent("s.a", intent(2), 2, "d2")
    writer.commit_intent("s.b", intent(2), 2, "d2")
    reader.ensure()
    with reader.one_look():
        assert {name: f.dt_version for name, f in reader.frontiers().items()} == {"s.a": 2, "s.b": 2}


def test_prefetch_creates_nothing_and_leaves_damage_to_the_first_read(tmp_path: Path) -> None:
    empty = MetadataStore(tmp_path / "empty", "meta")
    empty.prefetch()
    assert not (tmp_path / "empty").exists()  # ``ensure`` creates the tables, registering them
    store = MetadataStore(tmp_path / "meta", "meta")
    store.ensure()
    store.commit_intent("s.a", intent(1), 1, "d1")
    for data_file in Path(store.location(FRONTIERS)).glob("*.parquet"):
        data_file.write_bytes(b"not parquet")
    damaged = MetadataStore(tmp_path / "meta", "meta")
    with pytest.raises(MetadataDamaged):
        damaged.prefetch()
    with pytest.raises(MetadataDamaged, match="dyntable repair"):
        damaged.frontier("s.a")


def test_a_prefetched_store_still_brings_an_older_table_up_to_date(tmp_path: Path) -> None:
    """``prefetch`` spares ``ensure`` the tables it found current, never one that is not."""
    current = MetadataStore(tmp_path / "meta", "meta")
    current.ensure()
    prefetched = MetadataStore(tmp_path / "meta", "meta")
    prefetched.prefetch()
    assert prefetched._migration._current == set(SCHEMAS)
    location = tmp_path / "old" / FRONTIERS
    location.mkdir(parents=True)
    older = pa.schema([f for f in SCHEMAS[FRONTIERS] if f.name != "views"])
    DeltaTable.create(str(location), schema=older)
    store = MetadataStore(tmp_path / "old", "meta")
    store.prefetch()
    assert FRONTIERS not in store._migration._current
    store.ensure()
    upgraded = DeltaTable(str(location))
    assert "views" in {f.name for f in upgraded.schema().fields}
    assert upgraded.metadata().configuration == LOG_SETTINGS


def age_logs(store: MetadataStore, seconds: int) -> None:
    """Set each table's ``_delta_log`` folder's modification time ``seconds`` back, as a log
    nobody wrote for that long has."""
    for table in SCHEMAS:
        folder = Path(store.location(table)) / "_delta_log"
        then = folder.stat().st_mtime - seconds
        os.utime(folder, (then, then))


def test_a_table_nobody_committed_to_is_not_brought_up_to_date_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refresh reads the frontier table; while its log folder is unchanged (and was last
    changed well before it was read) the next refresh reads the rows held, without asking
    deltalake for new commits. A commit by anyone changes the folder and is read."""
    store, other = MetadataStore(tmp_path / "meta", "meta"), MetadataStore(tmp_path / "meta", "meta")
    store.ensure()
    store.commit_intent("s.a", intent(1), 1, "d1")
    age_logs(store, 60)
    assert set(store.frontiers()) == {"s.a"}  # brought up to date once, the folder's stamp kept
    updates: List[str] = []
    opened = store._tables._open[FRONTIERS]
    update = opened.update_incremental
    monkeypatch.setattr(opened, "update_incremental", lambda: updates.append("u") or update())
    assert {name: f.dt_version for name, f in store.frontiers().items()} == {"s.a": 1}
    assert updates == []
    other.commit_intent("s.a", intent(2), 2, "d2")
    assert {name: f.dt_version for name, f in store.frontiers().items()} == {"s.a": 2}
    assert updates == ["u"]


def history_row(refresh_id: str, name: str = "s.dt") -> HistoryRow:
    now = utcnow()
    return HistoryRow(name, refresh_id, now, State.SUCCEEDED, Action.NO_DATA, Trigger.SCHEDULED, now, now)


def _record_refreshes(root: str, writer: int, count: int) -> None:
    """A process recording ``count`` refreshes of its own DT, one metadata commit each."""
    store = MetadataStore(Path(root), "meta")
    for number in range(count):
        store.append_history(history_row(f"{writer}-{number}", f"s.dt{writer}"))
        store.frontiers()  # as every refresh reads them, while the others check point and clean up


@pytest.mark.slow
def test_processes_checkpointing_and_cleaning_up_each_other_s_log_lose_and_double_nothing(
    tmp_path: Path,
) -> None:
    """The metadata logs keep no history (LOG_SETTINGS): each tenth commit's checkpoint removes
    the commits before it, so a process reading or committing meets files another one just
    removed. That is no damage: every row lands once, and no read fails."""
    import multiprocessing

    store = MetadataStore(tmp_path / "meta", "meta")
    store.ensure()
    spawn = multiprocessing.get_context("spawn")  # deltalake's runtime does not survive a fork
    writers = [
        spawn.Process(target=_record_refreshes, args=(str(tmp_path / "meta"), w, 20)) for w in range(2)
    ]
    for process in writers:
        process.start()
    for process in writers:
        process.join(timeout=600)
    assert [process.exitcode for process in writers] == [0, 0]
    rows = MetadataStore(tmp_path / "meta", "meta").history()
    assert sorted(r.refresh_id for r in rows) == sorted(f"{w}-{n}" for w in range(2) for n in range(20))


def test_no_data_decided_without_the_lease_never_stands_against_a_clock_stamped_row(tmp_path: Path) -> None:
    """docs/ARCHITECTURE.md, "Object storage": a NO_DATA decided without the DT's lease is stamped
    just after the frontier it read. Two from one frontier keep the later data timestamp whatever
    their order, in the table, in a batch's memory and after compaction; any row stamped by the
    clock since (an intent, a frontier) supersedes them."""
    store = MetadataStore(tmp_path / "meta", "meta")
    store.ensure()
    store.commit_intent("s.a", intent(1), 1, "d1")
    current = store.frontier("s.a")
    assert current is not None
    later, earlier = (
        replace(intent(1), data_timestamp=current.data_timestamp + timedelta(minutes=m)) for m in (2, 1)
    )

    def claim(reached: Intent) -> Claim:
        return Claim("s.a", "r", reached.data_timestamp, current.data_timestamp, 1, str(tmp_path))

    store.open_batch()
    store.advance(current, later, claim(later))
    store.advance(current, earlier, claim(earlier))  # in memory: the later one stays
    frontier = store.frontier("s.a")
    assert frontier is not None and frontier.data_timestamp == later.data_timestamp
    store.close_batch()  # on a local disk no claim is checked
    store.advance(current, earlier, claim(earlier))  # written at once, after the later one
    frontier = store.frontier("s.a")
    assert frontier is not None and frontier.data_timestamp == later.data_timestamp
    store._compaction.compact(FRONTIERS)
    frontier = MetadataStore(tmp_path / "meta", "meta").frontier("s.a")
    assert frontier is not None and frontier.data_timestamp == later.data_timestamp
    store.record_intent("s.a", frontier, intent(2))
    frontier = store.frontier("s.a")
    assert frontier is not None and frontier.pending is not None  # not hidden
