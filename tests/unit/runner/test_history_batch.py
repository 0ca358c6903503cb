"""A runner tick commits its history rows once (MetadataStore.batch), on real Delta tables."""

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
    return HistoryRow(
        name=name,
        refresh_id=name,
        data_timestamp=now,
        state=State.SUCCEEDED,
        refresh_action=Action.NO_DATA,
        refresh_trigger=Trigger.SCHEDULED,
        refresh_start_time=now,
        refresh_end_time=now,
    )


def test_rows_of_a_batch_land_in_one_commit(tmp_path: Path):
    store = MetadataStore(tmp_path / "meta", "meta")
    store.ensure()
    history = store.location(REFRESH_HISTORY)
    before = DeltaTable(str(history)).version()
    with store.batch():
        store.append_history(row("s.a"))
        store.append_history(row("s.b"))
        store.append_history(row("s.c"))
        # Not written before the batch ends (another process sees nothing); this one sees them.
        assert MetadataStore(tmp_path / "meta", "meta").history() == []
        assert DeltaTable(str(history)).version() == before
        assert [r.name for r in store.history()] == ["s.a", "s.b", "s.c"]
    assert DeltaTable(str(history)).version() == before + 1
    assert [r.name for r in store.history()] == ["s.a", "s.b", "s.c"]
    store.append_history(row("s.d"))  # outside a batch: written at once
    assert DeltaTable(str(history)).version() == before + 2


def test_a_batch_that_ends_while_another_is_open_writes_what_both_recorded(tmp_path: Path):
    """The runner's ticks overlap, each a batch in a thread of its own: rows wait for the end of a
    batch, not for a moment when none is open (a runner whose ticks keep overlapping has none)."""
    store = MetadataStore(tmp_path / "meta", "meta")
    store.ensure()
    history = store.location(REFRESH_HISTORY)
    before = DeltaTable(str(history)).version()
    store.open_batch()  # a tick still running
    store.append_history(row("s.a"))
    with store.batch():  # a tick that starts later and ends first
        store.append_history(row("s.b"))
    assert DeltaTable(str(history)).version() == before + 1
    assert [r.name for r in MetadataStore(tmp_path / "meta", "meta").history()] == ["s.a", "s.b"]
    store.append_history(row("s.c"))  # the first tick goes on: its row waits for its end
    assert DeltaTable(str(history)).version() == before + 1
    store.close_batch()
    assert DeltaTable(str(history)).version() == before + 2
    assert [r.name for r in MetadataStore(tmp_path / "meta", "meta").history()] == ["s.a", "s.b", "s.c"]


def frontier_at(name: str, minutes: int, dt_version: int = 3):
    from datetime import timedelta

    from dbt.adapters.dyntable.dynamic_table.metadata import Frontier

    return Frontier(name, utcnow() - timedelta(minutes=minutes), {}, dt_version, "h", "auto", "select 1")


def intent_at(stamp):
    from dbt.adapters.dyntable.dynamic_table.metadata import Intent

    return Intent("r", stamp, {}, 3, "h", "auto", "select 1", Action.NO_DATA)


def test_no_data_advances_wait_for_the_batch_and_never_overwrite_a_newer_frontier(tmp_path: Path):
    store = MetadataStore(tmp_path / "meta", "meta")
    store.ensure()
    for name in ("s.a", "s.b"):
        store.commit_intent(name, intent_at(frontier_at(name, 10).data_timestamp), 3, "c3")
    a, b = store.frontier("s.a"), store.frontier("s.b")
    now = utcnow()
    with store.batch():
        store.advance(a, intent_at(now))
        store.advance(b, intent_at(now))
        assert store.frontier("s.a").data_timestamp == now  # this process reads its advance
        other = MetadataStore(tmp_path / "meta", "meta")  # another process reads the table
        assert other.frontier("s.a").data_timestamp == a.data_timestamp
        other.commit_intent("s.b", intent_at(utcnow()), 4, "c4")  # meanwhile, s.b refreshed
    after = MetadataStore(tmp_path / "meta", "meta").frontiers()
    assert after["s.a"].data_timestamp == now and after["s.a"].dt_version == 3
    assert after["s.b"].dt_version == 4 and after["s.b"].data_timestamp > now  # not overwritten
