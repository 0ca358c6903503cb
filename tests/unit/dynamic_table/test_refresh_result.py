"""What dbt's line for a dynamic-table model says (``RefreshResult.summary``)."""

from __future__ import annotations

from datetime import datetime, timezone

from dbt.adapters.dyntable.dynamic_table.lifecycle import Action, State
from dbt.adapters.dyntable.dynamic_table.refresh.record import RefreshResult

T = datetime(2026, 1, 1, tzinfo=timezone.utc)


def test_a_refresh_done_shows_its_action_and_rows() -> None:
    result = RefreshResult("s.dt", Action.INCREMENTAL, State.SUCCEEDED, "sources changed", T, 3, 1)
    assert result.summary == "INCREMENTAL +3 -1"
    assert RefreshResult("s.dt", Action.NO_DATA, State.SUCCEEDED, "no source changed", T).summary == (
        "NO_DATA +0 -0"
    )


def test_a_refresh_not_done_shows_skipped_though_it_chose_an_action() -> None:
    # a DT another process already took past this run's data timestamp: decided NO_DATA, SKIPPED
    later = RefreshResult("s.dt", Action.NO_DATA, State.SKIPPED, "already refreshed to a later ...", T)
    assert later.summary == "SKIPPED +0 -0"
    assert RefreshResult("s.dt", None, State.SKIPPED, "dbt --empty: ...", T).summary == "SKIPPED +0 -0"
