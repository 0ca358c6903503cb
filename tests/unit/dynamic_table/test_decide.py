"""The decide stage without an engine: which action a refresh takes, and the reason it records."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import pyarrow as pa
import pytest

from dbt.adapters.dyntable.delta_log import DataFile, DeltaLog, Interval
from dbt.adapters.dyntable.delta_log.model import ValueRange
from dbt.adapters.dyntable.differentiation import plan_query
from dbt.adapters.dyntable.dynamic_table.changeset import definition_hash
from dbt.adapters.dyntable.dynamic_table.lifecycle import Action, RefreshRequest, SourceRead, State, Trigger
from dbt.adapters.dyntable.dynamic_table.metadata import Frontier, Intent, MetadataStore, SourceVersion
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable, RefreshError
from dbt.adapters.dyntable.dynamic_table.refresh import net_change
from dbt.adapters.dyntable.dynamic_table.refresh.decide import (
    SourceNotReady,
    _version_read,
    creates_empty,
    decide,
    held_data_timestamp,
    maintained_definition,
    raised_for,
)
from dbt.adapters.dyntable.dynamic_table.refresh.facts import (
    NET_CHANGE_MAX_ROWS,
    NetChange,
    Observation,
    SourceState,
)
from dbt.adapters.dyntable.dynamic_table.refresh.planned_query import NotPlanned, OutputKey, PlannedQuery
from dbt.adapters.dyntable.engines.base import Capabilities
from dbt.adapters.dyntable.vocabulary import WEIGHT

T = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc)
SQL = "select k, sum(v) as total from s.t group by k"
LOG = DeltaLog("/nonexistent/s/t")  # never read: decide is pure
#: An engine whose statements cost only the bytes they read and write.
ENGINE = Capabilities(
    change_data_feed=False, truncate=False, alter_table_columns=False, persistent_catalog=True
)


def model(sql: str = SQL, **config: str) -> DynamicTable:
    return DynamicTable.from_node(
        {
            "schema": "s",
            "name": "dt",
            "compiled_code": sql,
            "config": {"target_lag": "1 minute", **config},
        }
    )


def frontier(dt: DynamicTable, versions: Dict[str, int], at: datetime = T - timedelta(minutes=1)) -> Frontier:
    sources = {name: SourceVersion(version, f"commit-{version}") for name, version in versions.items()}
    return Frontier(
        dt.name, at, sources, 3, definition_hash(dt.sql, dt.config), dt.config.refresh_mode, dt.sql
    )


def data_file(size: int) -> DataFile:
    return DataFile(f"part-{size}.parquet", f"file:///part-{size}", size, 1, {})


def source(
    start: Optional[int],
    end: int,
    added: int = 0,
    removed: int = 0,
    size: int = 1000,
    reason: Optional[str] = None,
    lost: Optional[str] = None,
    name: str = "s.t",
    changed_rows: Optional[int] = None,
) -> SourceState:
    interval = None
    if start is not None and start != end and lost is None:
        interval = Interval(
            start,
            end,
            tuple([data_file(added)] if added else []),
            tuple([data_file(removed)] if removed else []),
            reason,
            changed_rows=changed_rows,
        )
    return SourceState(name, LOG, start, end, f"commit-{end}", SourceRead.AS_OF, lost, interval, size)


class Planner:
    """Counts the calls: NO_DATA must not plan."""

    def __init__(self, outcome=None) -> None:
        self.calls = 0
        self.outcome = outcome or PlannedQuery(plan_query(SQL), OutputKey(["k"]))

    def __call__(self):
        self.calls += 1
        return self.outcome


def run(
    dt: DynamicTable,
    current: Optional[Frontier],
    sources: List[SourceState],
    planner=None,
    full_refresh: bool = False,
    at: datetime = T,
    dt_changed: Optional[str] = None,
    dt_size: int = 0,
    dt_rows: Optional[int] = None,
    capabilities: Capabilities = ENGINE,
    clock: Optional[str] = None,
    held_by: Tuple[str, ...] = (),
    held: Optional[datetime] = None,
    window_partitions: Optional[int] = None,
):
    request = RefreshRequest(T, Trigger.DBT_RUN, full_refresh)
    definition = maintained_definition(dt, current, True, request)
    planner = planner or Planner()
    observed = Observation(
        sources,
        at,
        dt_changed=dt_changed,
        dt_size_bytes=dt_size,
        dt_rows=dt_rows,
        clock=clock,
        held_by=held_by,
        window_partitions=window_partitions,
    )
    return decide(dt, definition, current, observed, planner, capabilities, held), planner


def test_unchanged_sources_are_no_data_without_planning() -> None:
    dt = model()
    decision, planner = run(dt, frontier(dt, {"s.t": 5}), [source(5, 5)])
    assert (decision.action, decision.state, decision.reason) == (
        Action.NO_DATA,
        State.SUCCEEDED,
        "no source changed",
    )
    assert planner.calls == 0


def test_a_query_reading_the_clock_recomputes_at_a_new_data_timestamp_though_no_source_changed() -> None:
    dt = model("select k, v from s.t where day >= current_date() - 7")
    current = frontier(dt, {"s.t": 5})
    decision, _ = run(
        dt, current, [source(5, 5)], planner=Planner(NotPlanned("", "")), clock="current_date()"
    )
    assert (decision.action, decision.reason) == (
        Action.FULL,
        "no source changed, but the query reads the clock (current_date()): recomputed as of the new "
        "data timestamp",
    )
    again, _ = run(dt, current, [source(5, 5)], at=current.data_timestamp, clock="current_date()")
    assert (again.action, again.reason) == (Action.NO_DATA, "no source changed")


def test_an_upstream_behind_this_table_skips_naming_it() -> None:
    dt = model()
    decision, _ = run(
        dt,
        frontier(dt, {"s.t": 5}, at=T),
        [source(5, 6, added=10)],
        at=T - timedelta(seconds=5),
        held_by=("s.up",),
    )
    assert (decision.action, decision.state) == (Action.NO_DATA, State.SKIPPED)
    assert decision.reason == "upstream dynamic table s.up is behind this one (at 2026-11-23 11:59:55 UTC)"


def test_a_table_another_refresh_took_further_skips_saying_so() -> None:
    dt = model()
    decision, _ = run(dt, frontier(dt, {"s.t": 5}, at=T + timedelta(seconds=5)), [source(5, 5)])
    assert (decision.action, decision.state) == (Action.NO_DATA, State.SKIPPED)
    assert decision.reason == (
        "already refreshed to a later data timestamp (2026-11-23 12:00:05 UTC) by a refresh that "
        "started after this one"
    )


def test_the_data_timestamp_a_refresh_reached_before_its_frontier_was_written_holds() -> None:
    """Inside another process's batch the frontier waits for the batch's end; the DT's lock says
    how far a refresh got. A later refresh at an earlier data timestamp, a rebuild included, is
    skipped: the DT's data timestamp never goes back (docs/ARCHITECTURE.md, "Exactly once")."""
    dt = model()
    reached = T + timedelta(seconds=30)
    current = frontier(dt, {"s.t": 5})
    assert held_data_timestamp(current, reached) == reached
    assert held_data_timestamp(current, None) == current.data_timestamp
    assert held_data_timestamp(None, reached) == reached
    assert held_data_timestamp(None, None) is None
    for full_refresh in (False, True):
        decision, planner = run(
            dt, current, [source(5, 6, added=10)], full_refresh=full_refresh, held=reached
        )
        assert (decision.action, decision.state) == (Action.NO_DATA, State.SKIPPED)
        assert "already refreshed to a later data timestamp (2026-11-23 12:00:30 UTC)" in decision.reason
        assert planner.calls == 0
    # At the data timestamp held (where the pipeline raises a rebuild's), the rebuild goes ahead.
    decision, _ = run(dt, current, [source(5, 6, added=10)], full_refresh=True, held=T)
    assert decision.action is Action.REINITIALIZE
    assert raised_for(reached, T) == (
        "rebuilt as of its data timestamp 2026-11-23 12:00:30 UTC, which another refresh reached, "
        "rather than 2026-11-23 12:00:00 UTC: a data timestamp never goes back"
    )


def test_no_data_says_which_source_commits_wait_for_a_clock_ahead_of_this_one() -> None:
    dt = model()
    waiting = "s.t: 2 newer commit(s) wait for the data timestamp to pass ..."
    decision, _ = run(dt, frontier(dt, {"s.t": 5}), [replace(source(5, 5), waiting=waiting)])
    assert (decision.action, decision.reason) == (Action.NO_DATA, f"no source changed; {waiting}")


def test_no_data_held_back_by_an_upstream_names_it() -> None:
    dt = model()
    held = T - timedelta(minutes=1)
    decision, _ = run(dt, frontier(dt, {"s.t": 5}, at=held), [source(5, 5)], at=held, held_by=("s.up",))
    assert (decision.action, decision.state) == (Action.NO_DATA, State.SUCCEEDED)
    assert decision.reason == (
        "no source changed as of 2026-11-23 11:59:00 UTC, the data timestamp of upstream dynamic "
        "table s.up, which was not refreshed past it"
    )


def test_changed_sources_refresh_incrementally_with_the_plan() -> None:
    dt = model()
    decision, planner = run(dt, frontier(dt, {"s.t": 5}), [source(5, 6, added=10)])
    assert decision.action is Action.INCREMENTAL and decision.reason.startswith("sources changed")
    assert decision.planned is planner.outcome and planner.calls == 1


@pytest.mark.parametrize(
    "current, full_refresh, reason",
    [
        (None, False, "no frontier recorded for this table"),
        ("same", True, "--full-refresh"),
        ("other sql", False, "definition changed"),
        ("other mode", False, "refresh mode changed from full to auto"),
    ],
)
def test_rebuild_reasons_known_before_reading_sources(current, full_refresh, reason) -> None:
    dt = model()
    recorded = None
    if current == "same":
        recorded = frontier(dt, {"s.t": 5})
    elif current == "other sql":
        recorded = frontier(model("select k from s.t"), {"s.t": 5})
    elif current == "other mode":
        recorded = frontier(model(refresh_mode="full"), {"s.t": 5})
    decision, _ = run(dt, recorded, [source(5, 5)], full_refresh=full_refresh)
    assert (decision.action, decision.reason) == (Action.REINITIALIZE, reason)


def test_first_build_and_on_schedule() -> None:
    dt = model()
    request = RefreshRequest(T, Trigger.DBT_RUN)
    assert maintained_definition(dt, None, False, request).rebuild_reason == "first build"
    scheduled = model(initialize="on_schedule")
    assert creates_empty(scheduled, False, request)
    assert not creates_empty(scheduled, True, request)
    assert not creates_empty(scheduled, False, RefreshRequest(T, Trigger.SCHEDULED))
    assert maintained_definition(scheduled, None, True, request).rebuild_reason == (
        "first refresh (initialize: on_schedule)"
    )


def test_changed_definition_policies() -> None:
    old = model("select k from s.t")
    request = RefreshRequest(T, Trigger.DBT_RUN)
    kept = maintained_definition(model(on_configuration_change="continue"), frontier(old, {}), True, request)
    assert (kept.sql, kept.rebuild_reason) == (old.sql, None)
    assert "keeping the previous definition" in kept.warnings[0]
    with pytest.raises(RefreshError, match="on_configuration_change is 'fail'"):
        maintained_definition(model(on_configuration_change="fail"), frontier(old, {}), True, request)


def test_a_source_that_cannot_be_differentiated_is_new_or_no_longer_read_reinitializes() -> None:
    dt = model()
    vacuumed = source(5, 7, added=10, reason="log entries are no longer present")
    decision, _ = run(dt, frontier(dt, {"s.t": 5}), [vacuumed])
    assert (decision.action, decision.reason) == (
        Action.REINITIALIZE,
        "s.t: log entries are no longer present",
    )
    decision, _ = run(dt, frontier(dt, {"s.u": 5}), [source(None, 7)])
    assert (decision.action, decision.reason) == (
        Action.REINITIALIZE,
        "s.u: no longer read; s.t: new to this table",
    )


def test_a_view_redefined_read_or_no_longer_read_reinitializes() -> None:
    dt = model()
    current = replace(frontier(dt, {"s.t": 5}), views={"s.v": "old", "s.gone": "x"})
    observed = Observation([source(5, 5)], T, views={"s.v": "select 1", "s.new": "select 2"})
    decision = decide(
        dt,
        maintained_definition(dt, current, True, RefreshRequest(T, Trigger.DBT_RUN)),
        current,
        observed,
        Planner(),
        ENGINE,
    )
    assert (decision.action, decision.reason) == (
        Action.REINITIALIZE,
        "view s.gone: no longer read; view s.new: now read; view s.v: redefined",
    )
    unchanged = replace(current, views=observed.view_fingerprints)
    decision = decide(
        dt,
        maintained_definition(dt, unchanged, True, RefreshRequest(T, Trigger.DBT_RUN)),
        unchanged,
        observed,
        Planner(),
        ENGINE,
    )
    assert decision.action is Action.NO_DATA


def test_a_source_that_is_no_longer_the_history_consumed_reinitializes_even_when_versions_match() -> None:
    """A reloaded seed or a re-created table can end at the very version number consumed."""
    dt = model()
    recreated = source(5, 5, lost="its version 5 is not the commit consumed")
    decision, planner = run(dt, frontier(dt, {"s.t": 5}), [recreated])
    assert (decision.action, decision.reason) == (
        Action.REINITIALIZE,
        "s.t: its version 5 is not the commit consumed",
    )
    assert planner.calls == 1  # planned, so refresh_mode: incremental can still refuse the query
    shorter = source(9, 2, lost="its log ends at version 2, before the consumed version 9")
    decision, _ = run(dt, frontier(dt, {"s.t": 9}), [shorter])
    assert decision.action is Action.REINITIALIZE and "ends at version 2" in decision.reason


def test_a_table_whose_own_log_changed_is_rebuilt_never_patched() -> None:
    dt = model()
    decision, _ = run(
        dt, frontier(dt, {"s.t": 5}), [source(5, 5)], dt_changed="its rows were changed at version 4"
    )
    assert (decision.action, decision.reason) == (
        Action.REINITIALIZE,
        "this table: its rows were changed at version 4",
    )


def test_a_query_that_cannot_be_differentiated_refreshes_full_or_fails_under_incremental() -> None:
    refused = NotPlanned("not incrementalizable: limit: ...", "limit: ...")
    dt = model()
    decision, _ = run(dt, frontier(dt, {"s.t": 5}), [source(5, 6, added=1)], Planner(refused))
    assert (decision.action, decision.reason) == (Action.FULL, refused.reason)
    strict = model(refresh_mode="incremental")
    with pytest.raises(RefreshError, match="refresh_mode 'incremental' but its query cannot be refreshed"):
        run(strict, frontier(strict, {"s.t": 5}), [source(5, 6, added=1)], Planner(refused))


def test_auto_weighs_the_bytes_each_action_reads_and_writes() -> None:
    dt = model()
    # an append is read once: far cheaper than rescanning the source and rewriting the table
    appended = run(dt, frontier(dt, {"s.t": 5}), [source(5, 6, added=400, size=1000)], dt_size=100)[0]
    assert appended.action is Action.INCREMENTAL
    # the recompute reads the source, then the table to write only what differs: 1000 + 2 × 100
    assert "s.t changes 400 B" in appended.reason and "1.2 kB to recompute" in appended.reason
    # rewritten files are read in both versions and grouped by every column to cancel them, as a
    # recompute groups its rows with the table's: where grouping a byte costs two of a scan, the
    # change costs 2 × 600 and the recompute 1000 + 2 × 2 × 100
    rewritten_files = [source(5, 6, added=300, removed=300, size=1000)]
    grouping = replace(ENGINE, grouping_cost=2.0)
    rewritten = run(dt, frontier(dt, {"s.t": 5}), rewritten_files, dt_size=100, capabilities=grouping)[0]
    assert rewritten.action is Action.FULL
    assert rewritten.reason.startswith("recomputing reads and writes about 1.4 kB")
    assert "s.t changes 1.2 kB" in rewritten.reason
    # where it costs as much as a scan, reading the change is cheaper
    cheap = run(dt, frontier(dt, {"s.t": 5}), rewritten_files, dt_size=100)[0]
    assert cheap.action is Action.INCREMENTAL and "s.t changes 600 B" in cheap.reason


def test_auto_counts_every_source_version_the_delta_query_reads() -> None:
    sql = "select a.k, b.v from s.a a join s.b b on a.k = b.k"
    dt = model(sql)
    planner = Planner(PlannedQuery(plan_query(sql), OutputKey(None)))
    one_side = [source(5, 6, added=100, name="s.a"), source(5, 5, name="s.b")]
    decision = run(dt, frontier(dt, {"s.a": 5, "s.b": 5}), one_side, planner, dt_size=500)[0]
    # only a's changes, joined to b as of now
    assert decision.action is Action.INCREMENTAL and "s.b at v1 1.0 kB" in decision.reason
    both_sides = [source(5, 6, added=100, name="s.a"), source(5, 6, added=100, name="s.b")]
    decision = run(dt, frontier(dt, {"s.a": 5, "s.b": 5}), both_sides, planner, dt_size=100)[0]
    # Δa ⋈ b@v1 + a@v0 ⋈ Δb reads both tables in full and both changes: more than a recompute
    assert decision.action is Action.FULL


def test_auto_weighs_a_delta_the_engine_applies_alone_as_written_once() -> None:
    """An append (no key) stays in the engine: its rows cost as much as the bytes a recompute
    writes. Under the change fuse they come to this process to be counted first, which costs
    ten times more (docs/ARCHITECTURE.md, "Applying")."""
    sql = "select k, v from s.t where v > 0"
    planner = Planner(PlannedQuery(plan_query(sql), OutputKey(None)))
    chosen = {}
    for config, cost in (({}, "the delta 500 B"), ({"max_change_rows": 1000000}, "the delta 5.0 kB")):
        dt = model(sql, **config)
        # half the source appended: half the DT's bytes are new rows
        decision = run(dt, frontier(dt, {"s.t": 5}), [source(5, 6, added=500)], planner, dt_size=1000)[0]
        assert cost in decision.reason, decision.reason
        chosen[bool(config)] = decision.action
    assert chosen == {False: Action.INCREMENTAL, True: Action.FULL}


def test_auto_counts_the_read_of_the_table_before_a_merge_staged_in_this_process() -> None:
    """Matched on whole rows, a delta that may delete comes to this process, which reads what the
    DT holds of each of its rows before the MERGE reads the DT again: two reads. On a key the plan
    proves, the engine's MERGE alone reads it, once (docs/ARCHITECTURE.md, "Applying")."""
    sql = "select k, v from s.t where v > 0"
    rewritten = [source(5, 6, added=10, removed=10, size=1000)]
    weighed = {}
    for key in (None, ["k"]):
        dt = model(sql)
        planner = Planner(PlannedQuery(plan_query(sql), OutputKey(key)))
        decision = run(dt, frontier(dt, {"s.t": 5}), rewritten, planner, dt_size=10_000)[0]
        table_reads = re.search(r"this table (\S+ \S+?)[,)]", decision.reason)
        assert table_reads is not None, decision.reason
        weighed["whole rows" if key is None else "proven key"] = (decision.action, table_reads.group(1))
    assert weighed == {
        "whole rows": (Action.FULL, "20.0 kB"),
        "proven key": (Action.INCREMENTAL, "10.0 kB"),
    }


def test_auto_counts_an_engines_fixed_cost_of_staging_a_delta_in_this_process() -> None:
    """Where staging a delta in this process has a fixed cost (delta-spark's shuffles and the
    driver's trip), a small change that may delete is cheaper to recompute over a small source; a
    delta the engine appends alone pays no staging, and a large source outweighs the cost. The
    filter keeps a tenth of the source's bytes. Staging is two jobs (the delta's, and the count of
    what the DT holds of it), or one where this process counts from the DT's files."""
    sql = "select k, v from s.t where v > 0"
    staging = replace(ENGINE, job_cost_bytes=3000)
    chosen = {}
    for kind, change in {
        "rewritten": dict(added=10, removed=10),
        "appended": dict(added=10),
    }.items():
        for size in (1000, 100_000):
            dt = model(sql, refresh_mode="auto")
            current = frontier(dt, {"s.t": 5})
            sources = [source(5, 6, size=size, **change)]
            for engine, capabilities in {"bare": ENGINE, "staging": staging}.items():
                decision = run(
                    dt,
                    current,
                    sources,
                    Planner(PlannedQuery(plan_query(sql), OutputKey(None))),
                    dt_size=size // 10,
                    capabilities=capabilities,
                )[0]
                chosen[kind, size, engine] = decision.action
                if (kind, size, engine) == ("rewritten", 1000, "staging"):
                    assert "staging the delta 6.0 kB" in decision.reason, decision.reason
                    # the recompute's own job (computing what differs) and the engine's MERGE
                    assert "(its engine jobs 9.0 kB)" in decision.reason, decision.reason
    assert chosen == {
        ("rewritten", 1000, "bare"): Action.INCREMENTAL,
        ("rewritten", 1000, "staging"): Action.FULL,
        ("rewritten", 100_000, "bare"): Action.INCREMENTAL,
        ("rewritten", 100_000, "staging"): Action.INCREMENTAL,
        ("appended", 1000, "bare"): Action.INCREMENTAL,
        ("appended", 1000, "staging"): Action.INCREMENTAL,
        ("appended", 100_000, "bare"): Action.INCREMENTAL,
        ("appended", 100_000, "staging"): Action.INCREMENTAL,
    }
    counted_here = replace(staging, counts_held_rows_in_process=True)
    dt = model(sql, refresh_mode="auto")
    sources = [source(5, 6, size=1000, added=10, removed=10)]
    decision = run(
        dt,
        frontier(dt, {"s.t": 5}),
        sources,
        Planner(PlannedQuery(plan_query(sql), OutputKey(None))),
        dt_size=100,
        capabilities=counted_here,
    )[0]
    # One staging job, and the DT read once (by the MERGE), not twice.
    assert "staging the delta 3.0 kB" in decision.reason and "this table 100 B" in decision.reason, (
        decision.reason
    )


def test_an_upstream_dt_whose_first_refresh_has_not_committed_is_waited_for(tmp_path: Path) -> None:
    """An upstream DT's frontier that holds only its first refresh's intent (DT version -1) is
    never read at "version -1": the refresh waits (SKIPPED) instead of failing; once committed,
    the version it produced is read."""
    upstream = model()
    created = Intent("r", T, {}, 0, "h", "auto", upstream.sql, Action.REINITIALIZE)
    pending = replace(frontier(upstream, {}), dt_version=-1, pending=created)
    metadata = MetadataStore(tmp_path / "meta", "meta")  # never read on this path
    for read in (SourceRead.UPSTREAM, SourceRead.BOUNDARY):
        with pytest.raises(
            SourceNotReady, match="s.dt is a dynamic table whose first refresh has not committed"
        ):
            _version_read(LOG, "s.dt", read, {"s.dt": pending}, T, metadata)
        committed = replace(pending, dt_version=1, pending=None)
        assert _version_read(LOG, "s.dt", read, {"s.dt": committed}, T, metadata) == 1


def test_auto_counts_a_windows_sort_over_the_partitions_a_change_touches() -> None:
    """A recompute sorts all of a window's input; the delta re-sorts only the partitions the
    change touches. A DT of each partition's first row holds one row per partition, so n changed
    rows touch at most n of its rows' partitions; where the writer did not count its rows, the
    delta is taken to sort everything, as a recompute does (docs/ARCHITECTURE.md, "Deciding")."""
    sql = "select k, v from (select k, v, row_number() over (partition by k order by v) as rn from s.t) r where rn = 1"
    planner = Planner(PlannedQuery(plan_query(sql), OutputKey(["k"])))
    dt = model(sql, refresh_mode="auto")
    decided = {}
    for changed_rows in (6, None):
        rewritten = [source(5, 6, added=100, removed=100, size=1000, changed_rows=changed_rows)]
        decision = run(dt, frontier(dt, {"s.t": 5}), rewritten, planner, dt_size=100, dt_rows=300)[0]
        decided[changed_rows] = decision.action
    assert decided == {6: Action.INCREMENTAL, None: Action.FULL}
    # rows not counted (the last decision): the recompute scans 1.0 kB, sorts it (four times its
    # bytes) and reads and groups the 100 B table with its result; the delta sorts as much
    assert decision.reason.startswith("recomputing reads, sorts and writes about 5.2 kB"), decision.reason
    assert "sorting touched partitions 4.0 kB" in decision.reason


def test_auto_prices_inserts_under_stored_first_rows_at_those_rows_never_the_input() -> None:
    """Where the input only gained rows, a DT of each partition's first row sorts its touched
    stored rows with the inserted ones and never reads the input (``top_one``): AUTO refreshes
    incrementally though every partition is touched, also over a staging view's derived column
    the DT drops; a change with deletes recomputes the touched partitions from the input."""
    staged = "(select k, v, w, to_date(w) as day from s.t where v is not null) staged"
    sql = (
        "select k, v from (select k, v, row_number() over (partition by k order by v desc) as rn "
        f"from {staged}) r where rn = 1"
    )
    plan = plan_query(sql, schema={"s.t": ["k", "v", "w"]})
    planner = Planner(PlannedQuery(plan, OutputKey(["k"])))
    dt = model(sql, refresh_mode="auto")
    decided = {}
    for kind, change in {"inserted": dict(added=10), "rewritten": dict(added=10, removed=10)}.items():
        sources = [source(5, 6, size=100_000, changed_rows=50, **change)]
        decision = run(dt, frontier(dt, {"s.t": 5}), sources, planner, dt_size=100, dt_rows=10)[0]
        decided[kind] = decision.action
        if kind == "inserted":
            # four times (the 100 B table, every partition touched, + the 10 B inserted)
            assert "sorting touched partitions 440 B" in decision.reason, decision.reason
    assert decided == {"inserted": Action.INCREMENTAL, "rewritten": Action.FULL}


def test_auto_bounds_a_windows_touched_partitions_by_the_partitions_counted_in_the_table() -> None:
    """Elsewhere a change of n rows touches at most n of the partitions counted in the DT
    (``partitions.measured``), and the delta sorts both versions of those: many partitions make
    the delta cheap, few make it sort as much as a recompute, and uncounted ones are taken to
    be all (docs/ARCHITECTURE.md, "Deciding")."""
    sql = "select k, d, v, v - lag(v) over (partition by k, d order by v) as dv from s.t"
    planner = Planner(PlannedQuery(plan_query(sql, schema={"s.t": ["k", "d", "v"]}), OutputKey(None)))
    dt = model(sql, refresh_mode="auto")
    decided = {}
    for partitions in (1000, 2, None):
        inserted = [source(5, 6, added=10, size=1000, changed_rows=5)]
        decision = run(
            dt, frontier(dt, {"s.t": 5}), inserted, planner, dt_size=1000, window_partitions=partitions
        )[0]
        decided[partitions] = decision.action
        if partitions == 1000:
            assert decision.reason.endswith(
                "; a change of 5 row(s) touches at most 5 of the 1,000 partitions counted in this table"
            ), decision.reason
    assert decided == {1000: Action.INCREMENTAL, 2: Action.FULL, None: Action.FULL}


def net(rows: int, weight: int = 1) -> NetChange:
    """A measured net change of ``rows`` rows of weight ``weight`` (docs/ARCHITECTURE.md,
    "Rewritten inputs")."""
    return NetChange(pa.table({"k": list(range(rows)), WEIGHT: [weight] * rows}))


def test_a_rewrite_of_the_same_rows_is_no_data_naming_it() -> None:
    dt = model()
    rewritten = replace(source(5, 7, added=1000, removed=1000), net=net(0))
    decision, planner = run(dt, frontier(dt, {"s.t": 5}), [rewritten])
    assert (decision.action, decision.state) == (Action.NO_DATA, State.SUCCEEDED)
    assert (
        decision.reason == "no source changed its rows: s.t was rewritten (version 5 to 7) with the same rows"
    )
    assert planner.calls == 0


def test_a_rewrite_of_a_few_rows_is_priced_by_them_and_named() -> None:
    """Without its net change a rewrite of every file costs both versions (AUTO recomputes, as
    the test above it shows); measured, it costs its rows."""
    dt = model()
    files = source(5, 6, added=1000, removed=1000, size=1000)
    unmeasured = run(dt, frontier(dt, {"s.t": 5}), [files], dt_size=100)[0]
    assert unmeasured.action is Action.FULL
    measured = run(dt, frontier(dt, {"s.t": 5}), [replace(files, net=net(2), row_count=1000)], dt_size=100)[0]
    assert measured.action is Action.INCREMENTAL
    assert measured.reason.startswith("s.t was rewritten (version 5 to 6): 2 row(s) added and 0 removed; ")
    too_big = run(dt, frontier(dt, {"s.t": 5}), [replace(files, net=NetChange(None))], dt_size=100)[0]
    assert f"more than {NET_CHANGE_MAX_ROWS:,} rows changed" in too_big.reason


def test_a_measured_rewrite_that_only_inserts_is_read_as_inserts() -> None:
    sql = "select k, count(*) as n from s.t group by k"
    dt = model(sql)
    planner = Planner(PlannedQuery(plan_query(sql), OutputKey(["k"])))
    inserts = replace(source(5, 6, added=1000, removed=1000), net=net(3), row_count=1000)
    decision, _ = run(dt, frontier(dt, {"s.t": 5}), [inserts], planner, dt_size=100)
    # inserts under a count fold into the stored groups: the source is never read again
    assert decision.action is Action.INCREMENTAL and "s.t changes 48 B" in decision.reason
    assert "s.t at v" not in decision.reason, decision.reason
    # AUTO folds deletes too, checked group by group (a failed check recomputes): still unread
    deletes = replace(inserts, net=net(3, weight=-1))
    decision, _ = run(dt, frontier(dt, {"s.t": 5}), [deletes], planner, dt_size=100)
    assert decision.action is Action.INCREMENTAL and "s.t at v" not in decision.reason, decision.reason
    # an aggregate that does not fold recomputes the touched groups from the source's new rows
    averaged = "select k, count(*) as n, avg(k) as a from s.t group by k"
    planner = Planner(PlannedQuery(plan_query(averaged), OutputKey(["k"])))
    dt = model(averaged)
    decision, _ = run(dt, frontier(dt, {"s.t": 5}), [deletes], planner, dt_size=100)
    assert "s.t at v1 1.0 kB" in decision.reason, decision.reason


@pytest.mark.parametrize(
    "added, removed, changed, rewrites",
    [
        (100, 100, None, True),  # an overwrite or a REPLACE: its writer did not count
        (100, 100, 2, True),  # an UPDATE of one row copied the other 99 of its file
        (100, 100, 60, False),  # most rows changed
        (100, 0, 100, False),  # an append
        (0, 0, None, False),
    ],
)
def test_which_intervals_rewrite_files(added, removed, changed, rewrites) -> None:
    interval = Interval(
        5,
        6,
        tuple([DataFile("a", "file:///a", 10, added, {})] if added else []),
        tuple([DataFile("r", "file:///r", 10, removed, {})] if removed else []),
        changed_rows=changed,
    )
    assert net_change.rewrites(interval) is rewrites


def test_an_update_marked_by_a_deletion_vector_is_not_a_rewrite() -> None:
    """One row updated in a file of a million: its deletion vector masks the old row and a new
    file holds the new one. The masked row is read from the row group holding it, so the change
    is two rows, priced as such, not the file twice (docs/ARCHITECTURE.md, "Rewritten inputs")."""
    big = DataFile("big", "file:///big", 8_000_000, 1_000_000, {})
    interval = Interval(
        5,
        6,
        (DataFile("new", "file:///new", 800, 1, {}),),
        masked=(big,),
        changed_rows=2,
        newly_masked={"big": np.array([7])},
    )
    assert not net_change.rewrites(interval)
    assert interval.removed_rows == 1
    assert interval.removed_bytes == 8


class DailyFiles:
    """A source's log at any version: one file a day of ``size`` bytes, for ``days`` days."""

    def __init__(self, days: int, size: int) -> None:
        self.files = [
            DataFile(f"day-{d}", f"file:///day-{d}", size, 100, {}, {"ts": day_range(d, d)})
            for d in range(days)
        ]

    def files_at(self, version: int) -> List[DataFile]:
        return self.files


def day_range(first: int, last: int) -> ValueRange:
    start = datetime(2024, 1, 1, tzinfo=timezone.utc)
    return ValueRange(start + timedelta(days=first, hours=1), start + timedelta(days=last, hours=20), False)


def test_a_rescan_of_the_changed_days_only_is_priced_at_their_files() -> None:
    """A GROUP BY of a source's days, the source changed on its last day: the delta rescans the
    files of that day and of the day before (a day either side, for the engine's time zone), 2 of
    30, and AUTO refreshes incrementally where a rescan of all of them cost as much as a recompute
    (docs/ARCHITECTURE.md, "Pruned rescans")."""
    sql = "select to_date(ts) as day, max(v) as hottest, avg(v) as mean from s.t group by to_date(ts)"
    dt = model(sql, refresh_mode="auto")
    log = DailyFiles(30, 10_000)
    changed = DataFile("new", "file:///new", 500, 5, {}, {"ts": day_range(29, 29)})
    interval = Interval(1, 2, (changed,), (log.files[-1],), changed_rows=10)
    state = SourceState("s.t", log, 1, 2, "commit-2", SourceRead.AS_OF, None, interval, 300_000)  # type: ignore[arg-type]
    planner = Planner(PlannedQuery(plan_query(sql), OutputKey(["day"])))
    decision, _ = run(dt, frontier(dt, {"s.t": 1}), [state], planner=planner, dt_size=1_000, dt_rows=30)
    assert decision.action is Action.INCREMENTAL, decision.reason
    assert "s.t at v1 within the change's range 20.0 kB" in decision.reason, decision.reason
    # Where each engine job costs more than the bytes saved (delta-spark), the engine's MERGE of
    # the groups on their key (two jobs) weighs against the recompute's own: the job computing
    # what differs from the DT, and the engine's MERGE writing it (three).
    jobs = replace(ENGINE, job_cost_bytes=200_000)
    decision, _ = run(
        dt, frontier(dt, {"s.t": 1}), [state], planner=planner, dt_size=1_000, dt_rows=30, capabilities=jobs
    )
    assert decision.action is Action.INCREMENTAL, decision.reason
    assert "the engine's MERGE 400.0 kB" in decision.reason and "against 902.0 kB" in decision.reason
    # Where this process counts what a small DT holds and may write it, the delta is staged here
    # (one job) and merged by deltalake: incremental again, priced at that one job.
    here = replace(jobs, counts_held_rows_in_process=True, merge_in_process=True)
    decision, _ = run(
        dt, frontier(dt, {"s.t": 1}), [state], planner=planner, dt_size=1_000, dt_rows=30, capabilities=here
    )
    assert decision.action is Action.INCREMENTAL, decision.reason
    assert "staging the delta 200.0 kB" in decision.reason and "MERGE" not in decision.reason
