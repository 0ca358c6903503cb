"""The changeset without an engine: each setting's component against the existing table's value,
and what a changed frontier makes of them (a rebuild and its reason)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Dict, Mapping, Optional, Tuple

import pytest

from dbt.adapters.dyntable.dynamic_table.changeset import (
    DEFINITION_CHANGED,
    TABLE_COMMENT,
    Changeset,
    Clustering,
    Comments,
    QueryDefinition,
    RefreshMode,
    SettingChange,
    TargetLag,
    definition_changes,
    definition_hash,
    since_built,
)
from dbt.adapters.dyntable.dynamic_table.config import DynamicTableConfig
from dbt.adapters.dyntable.dynamic_table.lifecycle import RefreshRequest, Trigger
from dbt.adapters.dyntable.dynamic_table.metadata import Frontier
from dbt.adapters.dyntable.dynamic_table.model import Docs, DynamicTable
from dbt.adapters.dyntable.dynamic_table.refresh.decide import maintained_definition
from dbt.adapters.dyntable.dynamic_table.refresh.record import first_graph_row

T = datetime(2026, 12, 4, 12, 0, tzinfo=timezone.utc)
SQL = "select k, sum(v) as total from s.t group by k"


def config(**values: Any) -> DynamicTableConfig:
    return DynamicTableConfig.from_model("m", {"target_lag": "5 minutes", **values})


def model(sql: str = SQL, **values: Any) -> DynamicTable:
    node = {
        "schema": "s",
        "name": "dt",
        "compiled_code": sql,
        "config": {"target_lag": "5 minutes", **values},
    }
    return DynamicTable.from_node(node)


def built_with(dt: DynamicTable) -> Frontier:
    """The frontier a refresh of ``dt`` as it is now would have recorded."""
    return Frontier(dt.name, T, {}, 3, definition_hash(dt.sql, dt.config), dt.config.refresh_mode, dt.sql)


# (component built from the model, the existing table's value) -> the change, or None
DIFFS: Tuple[Tuple[Any, Any, Optional[Tuple[str, str, bool]]], ...] = (
    (RefreshMode.from_config(config()), "auto", None),
    (RefreshMode.from_config(config(refresh_mode="full")), "auto", ("auto", "full", True)),
    (TargetLag.from_config(config()), "5 minutes", None),
    (TargetLag.from_config(config(target_lag="1 hour")), "5 minutes", ("5 minutes", "1 hour", False)),
    (TargetLag.from_config(config(target_lag="downstream")), "1 hour", ("1 hour", "downstream", False)),
    # Clustering columns compare in any order and case, as the engine's detail lists them.
    (Clustering.from_config(config(cluster_by=["a", "B"])), Clustering.existing(["b", "A"]), None),
    (Clustering.from_config(config(cluster_by="a")), (), ("none", "(a)", False)),
    (Clustering.from_config(config()), Clustering.existing(["a"]), ("(a)", "none", False)),
)


@pytest.mark.parametrize("component, existing, expected", DIFFS)
def test_each_component_diffs_against_the_existing_value(
    component: Any, existing: Any, expected: Optional[Tuple[str, str, bool]]
) -> None:
    change = component.get_diff(existing)
    if expected is None:
        assert change is None
        return
    assert change is not None
    assert (change.before, change.after, change.requires_full_refresh) == expected
    assert change.setting == component.setting
    assert str(change) == f"{component.setting} changed from {expected[0]} to {expected[1]}"


def test_the_definition_covers_the_query_its_keys_and_partitioning_but_not_the_lag() -> None:
    base = QueryDefinition.from_model(SQL, config())
    # Whitespace is not a change; the lag applies without a rebuild.
    assert base.get_diff(QueryDefinition.from_model(f"  {SQL}\n", config(target_lag="1 day")).wanted) is None
    for sql, values in (
        ("select k, count(*) as total from s.t group by k", {}),
        (SQL, {"unique_key": "k"}),
        (SQL, {"partition_by": "k"}),
    ):
        change = base.get_diff(QueryDefinition.from_model(sql, config(**values)).wanted)
        assert change is not None and change.requires_full_refresh
        # A fingerprint says nothing to a user: the change reads as the reason it is.
        assert str(change) == DEFINITION_CHANGED


COMMENTS: Tuple[Tuple[Docs, Mapping[str, str], Tuple[str, ...]], ...] = (
    (Docs(), {}, ()),
    (Docs("orders", {"id": "the key"}), {TABLE_COMMENT: "orders", "id": "the key"}, ()),
    (Docs("orders", {"ID": "the key"}), {TABLE_COMMENT: "", "id": "the key"}, (TABLE_COMMENT,)),
    (Docs(None, {"id": "the key", "v": "a value"}), {"id": "old", "v": "a value"}, ("id",)),
    # A comment the docs do not ask for stays; an empty asked comment asks for nothing.
    (Docs(None, {"id": ""}), {"id": "kept", "v": "kept"}, ()),
)


@pytest.mark.parametrize("docs, existing, missing", COMMENTS)
def test_comments_change_where_an_asked_comment_is_missing(
    docs: Docs, existing: Mapping[str, str], missing: Tuple[str, ...]
) -> None:
    comments = Comments.from_docs(docs)
    assert tuple(comments.missing(existing)) == missing
    change = comments.get_diff(existing)
    assert (change is None) == (not missing)
    if change is not None:
        assert not change.requires_full_refresh


def test_a_changeset_rebuilds_for_the_changes_that_need_it() -> None:
    lag = SettingChange("target lag", "5 minutes", "1 hour", False)
    mode = SettingChange("refresh mode", "auto", "full", True)
    assert not Changeset((lag,)).requires_full_refresh
    assert Changeset((lag,)).rebuild_reason() is None
    both = Changeset((mode, lag))
    assert both.requires_full_refresh
    assert both.rebuild_reason() == "refresh mode changed from auto to full"
    assert both.get("target lag") == lag and both.get("comments") is None
    assert both.without("refresh mode") == Changeset((lag,))


def test_a_frontier_records_the_definition_and_refresh_mode() -> None:
    dt = model()
    assert definition_changes(dt.sql, dt.config, built_with(dt)) == Changeset()
    lag_changed = model(target_lag="1 hour")
    assert definition_changes(lag_changed.sql, lag_changed.config, built_with(dt)) == Changeset()
    both = model("select k, count(*) as total from s.t group by k", refresh_mode="full")
    changes = definition_changes(both.sql, both.config, built_with(dt))
    assert [c.setting for c in changes.changes] == [QueryDefinition.setting, RefreshMode.setting]


REQUEST = RefreshRequest(T, Trigger.DBT_RUN)
REBUILDS: Tuple[Tuple[Dict[str, Any], Optional[str]], ...] = (
    ({}, None),
    ({"target_lag": "1 hour"}, None),
    ({"refresh_mode": "incremental"}, "refresh mode changed from auto to incremental"),
    # A new definition rebuilds for itself, whatever mode comes with it.
    ({"sql": "select k from s.t", "refresh_mode": "full"}, DEFINITION_CHANGED),
)


@pytest.mark.parametrize("change, reason", REBUILDS)
def test_what_the_decide_stage_rebuilds_for(change: Dict[str, Any], reason: Optional[str]) -> None:
    before = model()
    values = dict(change)
    after = model(values.pop("sql", SQL), **values)
    definition = maintained_definition(after, built_with(before), True, REQUEST)
    assert definition.rebuild_reason == reason
    assert definition.sql == after.sql


def test_continue_keeps_the_recorded_definition_and_mode_changes_still_rebuild() -> None:
    before = model()
    recorded = built_with(before)
    kept = maintained_definition(
        model("select k from s.t", on_configuration_change="continue"), recorded, True, REQUEST
    )
    assert (kept.sql, kept.hash, kept.rebuild_reason) == (before.sql, recorded.definition_hash, None)
    moved = maintained_definition(
        model(refresh_mode="full", on_configuration_change="fail"), recorded, True, REQUEST
    )
    assert moved.rebuild_reason == "refresh mode changed from auto to full"


SINCE_BUILT: Tuple[Tuple[Dict[str, Any], str], ...] = (
    ({}, ""),
    (
        {"target_lag": "1 hour"},
        "target lag changed from 5 minutes to 1 hour: applied at the next refresh, without a rebuild",
    ),
    (
        {"sql": "select k from s.t"},
        f"{DEFINITION_CHANGED}: the next refresh rebuilds the table",
    ),
    (
        {"sql": "select k from s.t", "on_configuration_change": "continue"},
        f"{DEFINITION_CHANGED}: the previous definition is kept (on_configuration_change: continue)",
    ),
    (
        {"sql": "select k from s.t", "on_configuration_change": "fail", "refresh_mode": "full"},
        f"{DEFINITION_CHANGED}: the next refresh fails (on_configuration_change: fail); "
        "refresh mode changed from auto to full: the next refresh rebuilds the table",
    ),
)


@pytest.mark.parametrize("change, said", SINCE_BUILT)
def test_what_explain_says_changed_since_the_last_refresh(change: Dict[str, Any], said: str) -> None:
    before = model()
    graph = first_graph_row(before)
    values = dict(change)
    after = model(values.pop("sql", SQL), **values)
    assert since_built(after.sql, after.config, built_with(before), graph) == said
    # Before its first refresh, nothing is recorded to compare with.
    assert since_built(after.sql, after.config, None, None) == ""
