"""Recovering a refresh whose intent its DT commit carried (docs/ARCHITECTURE.md, "Exactly once"):
real Delta tables written with deltalake, as the in-process writes write them, no engine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import pyarrow as pa
from deltalake import CommitProperties, write_deltalake

from dbt.adapters.dyntable.delta_log import DeltaLog
from dbt.adapters.dyntable.dynamic_table.lifecycle import Action, Trigger
from dbt.adapters.dyntable.dynamic_table.metadata import Intent, MetadataStore, SourceVersion, utcnow
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.refresh.record import (
    CARRIED_INTENT,
    Recorder,
    carried_intent,
    carrying,
)

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
    ):
        assert carried_intent(other) is None, other
