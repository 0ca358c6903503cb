"""Recovering a refresh whose intent its DT commit carried (docs/ARCHITECTURE.md, "Exactly once"):
real Delta tables written with deltalake, as the in-process writes write them, no engine."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Optional

import pyarrow as pa
import pytest
from deltalake import CommitProperties, write_deltalake

from dbt.adapters.dyntable.delta_log import DeltaLog
from dbt.adapters.dyntable.dynamic_table.lifecycle import Action, Trigger
from dbt.adapters.dyntable.dynamic_table.metadata import Intent, MetadataStore, SourceVersion, utcnow
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.refresh.carried import (
    CARRIED_INTENT,
    carried_intent,
    carrying,
    carrying_condition,
)
from dbt.adapters.dyntable.dynamic_table.refresh.record import Recorder

DT = DynamicTable.from_node(
    {"schema": "s", "name": "dt", "compiled_code": "select k from s.t", "config": {"target_lag": "1 minute"}}
)
ROWS = pa.table({"k": pa.array([1, 2], pa.int64())})


def intent(base_version: int, source_version: int) -> Intent:
    sources = {"s.t": SourceVersion(source_version, f"c{source_version}")}
    return Intent(
        "crashed", utcnow(), sources, base_version, "h", "auto", "select k from s.t", Action.INCREMENTAL
    )


def write(location: Path, carried: Optional[Intent] = None, data_change: bool = True) -> None:
    if not data_change:  # a compaction: files rewritten, no row changed
        from deltalake import DeltaTable

        DeltaTable(str(location)).optimize.compact()
        return
    properties = CommitProperties(custom_metadata={"userMetadata": carrying(carried)}) if carried else None
    write_deltalake(str(location), ROWS, mode="append", commit_properties=properties)


def setup(tmp_path: Path) -> tuple[Path, MetadataStore, Recorder]:
    location = tmp_path / "s" / "dt"
    write(location)  # version 0: the DT's first build
    write(location)  # version 1: a refresh that recorded its frontier
    store = MetadataStore(tmp_path / "meta", "meta")
    store.ensure()
    store.commit_intent(DT.name, intent(0, 1), 1, DeltaLog(location).commit_id(1))
    return location, store, Recorder(store)


def test_a_commit_carrying_the_intent_of_a_refresh_that_died_before_its_frontier_is_adopted(
    tmp_path: Path,
) -> None:
    location, store, recorder = setup(tmp_path)
    write(location, data_change=False)  # version 2: that refresh's compaction of the DT
    write(location, carried=intent(2, 5))  # version 3: the refresh that died after its commit
    recovered = recorder.recover(DT, DeltaLog(location))
    assert recovered is not None
    assert (recovered.dt_version, recovered.source_versions) == (3, {"s.t": 5})
    assert recovered.dt_commit == DeltaLog(location).commit_id(3)
    assert store.frontier(DT.name) == recovered
    row = store.history(DT.name)[-1]
    assert (row.refresh_trigger, row.state, row.dt_version) == (Trigger.RECOVERY, "SUCCEEDED", 3)
    assert row.state_message == "recovered: the crashed refresh committed version 3"
    assert recorder.recover(DT, DeltaLog(location)) == recovered  # once adopted, nothing to do


def test_a_write_by_another_writer_is_not_adopted(tmp_path: Path) -> None:
    location, store, recorder = setup(tmp_path)
    frontier = store.frontier(DT.name)
    write(location)  # another writer, no intent: decide() rebuilds the DT
    assert recorder.recover(DT, DeltaLog(location)) == frontier
    write(location, carried=intent(2, 5))  # carried, but after that other writer's change
    assert recorder.recover(DT, DeltaLog(location)) == frontier
    assert store.history(DT.name) == []


def test_an_intent_carried_on_another_base_is_not_adopted(tmp_path: Path) -> None:
    location, store, recorder = setup(tmp_path)
    frontier = store.frontier(DT.name)
    write(location, carried=intent(0, 5))  # version 2, carrying an intent on version 0
    carried = carried_intent(DeltaLog(location).commit_info(2))
    assert carried is not None and carried.base_version == 0
    assert recorder.recover(DT, DeltaLog(location)) == frontier
    assert frontier is not None and frontier.dt_version == 1


def test_only_a_commit_recording_an_intent_under_its_key_carries_one() -> None:
    """Other writers record their own ``userMetadata`` (any text): none of it is an intent."""
    carried = intent(2, 5)
    assert carried_intent({"userMetadata": carrying(carried)}) == carried
    for other in (
        {},
        {"userMetadata": None},
        {"userMetadata": "job=daily-load run=42"},
        {"userMetadata": json.dumps(["dyntable.intent"])},
        {"userMetadata": json.dumps({"job": carried.to_json()})},
        {"userMetadata": json.dumps({CARRIED_INTENT: 7})},
        {CARRIED_INTENT: carried.to_json()},  # not where this project writes it
        {"operationParameters": {"mergePredicate": "t.k = s.k AND 'dyntable.intent:!!' IS NOT NULL"}},
        {"operationParameters": {"mergePredicate": "t.k = s.k AND 'dyntable.intent:e30=' IS NOT NULL"}},
        {"operationParameters": {"predicate": carrying_condition(carrying(carried))}},
    ):
        assert carried_intent(other) is None, other


def test_a_merge_condition_carries_an_intent_as_the_engine_re_renders_it() -> None:
    """Sail records a MERGE's condition re-rendered (its tokens re-spaced): the carried text
    survives that, whatever the intent's SQL holds (quotes, backslashes, newlines)."""
    carried = replace(intent(2, 5), definition="select 'it''s' as a,\n  '\\' as b from t")
    condition = f"t.k = s.k AND {carrying_condition(carrying(carried))}"
    re_rendered = condition.replace("t.k = s.k", "t . k = s . k") + " "  # as Sail records it
    for recorded in (condition, re_rendered):
        assert carried_intent({"operationParameters": {"mergePredicate": recorded}}) == carried


def test_a_refresh_whose_process_still_has_its_batch_open_is_adopted_without_a_recovery(
    tmp_path: Path,
) -> None:
    """Inside a batch the frontier a refresh reached waits for the batch's end, and its intent,
    carried or pending, names the process's mark. Another process refreshing the DT meanwhile
    takes that frontier up without calling the refresh crashed: the refresh's own process
    records it. Once that process is gone without writing it, the refresh did crash."""
    location, store, _ = setup(tmp_path)
    running = MetadataStore(tmp_path / "meta", "meta")  # the process whose batch is open
    other = Recorder(MetadataStore(tmp_path / "meta", "meta"))  # another process
    running.open_batch()
    writer = running.writer()
    assert writer is not None and MetadataStore(tmp_path / "meta", "meta").writer_alive(writer)
    assert not running.writer_alive(writer)  # its own mark: its pending frontiers are its own
    write(location, carried=replace(intent(1, 5), writer=writer))  # version 2
    adopted = other.recover(DT, DeltaLog(location))
    assert adopted is not None and (adopted.dt_version, adopted.source_versions) == (2, {"s.t": 5})
    pending = replace(intent(2, 6), writer=writer)
    running.record_intent(DT.name, adopted, pending)  # the next refresh, not carried: pending
    write(location)  # version 3, its commit
    adopted = Recorder(MetadataStore(tmp_path / "meta", "meta")).recover(DT, DeltaLog(location))
    assert adopted is not None and (adopted.dt_version, adopted.source_versions) == (3, {"s.t": 6})
    assert store.history(DT.name) == []  # no RECOVERY: the running process records both

    running.close_batch()  # nothing of its own pending: the mark goes with the batch
    assert not MetadataStore(tmp_path / "meta", "meta").writer_alive(writer)
    write(location, carried=replace(intent(3, 7), writer=writer))  # version 4: as if it had died
    recovered = Recorder(MetadataStore(tmp_path / "meta", "meta")).recover(DT, DeltaLog(location))
    assert recovered is not None and recovered.dt_version == 4
    assert [(h.refresh_trigger, h.state) for h in store.history(DT.name)] == [(Trigger.RECOVERY, "SUCCEEDED")]


@pytest.mark.parametrize("intent_kept", ["carried", "pending"])
def test_a_refresh_whose_process_writes_its_frontier_while_another_looks_is_not_called_crashed(
    tmp_path: Path, intent_kept: str
) -> None:
    """The race the writer mark leaves: another process reads the DT's frontier before the
    refresh's process writes it at its batch's end, and asks whether that process runs after it
    let its mark go. The frontier is written by then, so the refresh did not crash."""
    location, store, _ = setup(tmp_path)
    running = MetadataStore(tmp_path / "meta", "meta")
    running.open_batch()
    reached = replace(intent(1, 5), writer=running.writer())
    if intent_kept == "carried":
        write(location, carried=reached)  # version 2
    else:
        running.record_intent(DT.name, store.frontier(DT.name), reached)
        write(location)  # version 2
    running.commit_intent(DT.name, reached, 2, DeltaLog(location).commit_id(2))  # at the batch's end

    looking = MetadataStore(tmp_path / "meta", "meta")
    asked = looking.writer_alive

    def after_its_batch_ended(mark: str) -> bool:
        running.close_batch()  # the frontier written, then the mark let go
        return asked(mark)

    looking.writer_alive = after_its_batch_ended  # type: ignore[method-assign]
    adopted = Recorder(looking).recover(DT, DeltaLog(location))
    assert adopted is not None and (adopted.dt_version, adopted.source_versions) == (2, {"s.t": 5})
    assert adopted.pending is None
    assert store.history(DT.name) == []  # no RECOVERY row: its process recorded the refresh


def test_a_mark_left_by_a_process_that_died_is_swept_by_the_next_mark(tmp_path: Path) -> None:
    import fcntl

    from dbt.adapters.dyntable.dynamic_table.locking import WRITERS_DIR, WriterMark

    folder = tmp_path / WRITERS_DIR
    folder.mkdir()
    (folder / "dead.lock").write_text("")  # its process died: nobody holds it
    mark = WriterMark(tmp_path)
    held = mark.hold()
    assert sorted(p.name for p in folder.iterdir()) == [f"{held}.lock"]
    with open(folder / f"{held}.lock") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            raise AssertionError("the mark is not locked")
        except BlockingIOError:
            pass
    assert mark.hold() == held  # the same until released
    mark.release()
    assert list(folder.iterdir()) == []
