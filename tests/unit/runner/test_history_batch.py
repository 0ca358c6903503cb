"""A runner tick commits its history rows once (MetadataStore.history_batch), on real Delta tables."""

from __future__ import annotations

from pathlib import Path

from deltalake import DeltaTable

from dbt.adapters.dyntable.dynamic_table.lifecycle import Action, State, Trigger
from dbt.adapters.dyntable.dynamic_table.metadata import (
    REFRESH_HISTORY,
    HistoryRow,
    MetadataStore,
    utcnow,
)


def row(name: str) -> HistoryRow:
    now = utcnow()
    return HistoryRow(name=name, refresh_id=name, data_timestamp=now, state=State.SUCCEEDED,
                      refresh_action=Action.NO_DATA, refresh_trigger=Trigger.SCHEDULED,
                      refresh_start_time=now, refresh_end_time=now)


def test_rows_of_a_batch_land_in_one_commit(tmp_path: Path):
    store = MetadataStore(tmp_path / "meta", "meta")
    store.ensure()
    history = store.location(REFRESH_HISTORY)
    before = DeltaTable(str(history)).version()
    with store.history_batch():
        with store.history_batch():  # nested: the outer batch commits
            store.append_history(row("s.a"))
        store.append_history(row("s.b"))
        store.append_history(row("s.c"))
        assert store.history() == []  # nothing visible before the batch ends
    assert DeltaTable(str(history)).version() == before + 1
    assert [r.name for r in store.history()] == ["s.a", "s.b", "s.c"]
    store.append_history(row("s.d"))  # outside a batch: written at once
    assert DeltaTable(str(history)).version() == before + 2
