"""A rewritten input's net change seen through the columns a DT's query reads
(``net_change.read_through``; docs/ARCHITECTURE.md, "Rewritten inputs"): rows that differ only in
columns the query never reads cannot change its result, so the input counts as unchanged."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.dyntable.differentiation import plan_query
from dbt.adapters.dyntable.dynamic_table.lifecycle import Action
from dbt.adapters.dyntable.dynamic_table.refresh.facts import NetChange, Observation
from dbt.adapters.dyntable.dynamic_table.refresh.net_change import read_columns, read_through
from dbt.adapters.dyntable.dynamic_table.refresh.planned_query import NotPlanned, OutputKey, PlannedQuery
from dbt.adapters.dyntable.vocabulary import WEIGHT
from tests.unit.dynamic_table.test_decide import Planner, T, frontier, model, run, source

SCHEMA = {"s.dim": ["id", "site", "max_temp"], "s.t": ["k", "id", "v"]}
JOINED = "select t.k, d.site, t.v from s.t as t join s.dim as d on d.id = t.id"


def planned(sql: str) -> Planner:
    return Planner(PlannedQuery(plan_query(sql, schema=SCHEMA), OutputKey(None)))


def moved(column: str, old: object, new: object) -> NetChange:
    """Device 1's row replaced by one whose ``column`` went from ``old`` to ``new``."""
    rows = {"id": [1, 1], "site": ["a", "a"], "max_temp": [40.0, 40.0], WEIGHT: [-1, 1]}
    rows[column] = [old, new]
    return NetChange(pa.table(rows))


def rewritten(net: NetChange, name: str = "s.dim"):
    return replace(source(5, 6, added=1000, removed=1000, name=name), net=net)


def test_the_columns_a_plan_reads_of_each_table() -> None:
    plan = plan_query(JOINED + " where d.max_temp > 0", schema=SCHEMA)
    assert read_columns(plan, "s.dim") == {"id", "site", "max_temp"}
    assert read_columns(plan_query(JOINED, schema=SCHEMA), "s.dim") == {"id", "site"}
    assert read_columns(plan_query("select count(*) as n from s.dim", schema=SCHEMA), "s.dim") == set()
    assert read_columns(plan_query(JOINED, schema=SCHEMA), "s.other") is None


def test_a_change_in_a_column_the_query_does_not_read_is_no_change() -> None:
    observed = Observation([rewritten(moved("max_temp", 40.0, 42.0)), source(5, 5, name="s.t")], T)
    seen = read_through(observed, planned(JOINED))
    dim = seen.sources[0]
    assert dim.unchanged and dim.net is not None and dim.net.empty
    assert dim.net.describe() == "1 row(s) added and 1 removed, in columns it does not read"
    dt = model(JOINED)
    decision, _ = run(dt, frontier(dt, {"s.dim": 5, "s.t": 5}), list(seen.sources), planned(JOINED))
    assert decision.action is Action.NO_DATA
    assert decision.reason == (
        "no source changed its rows: s.dim was rewritten (version 5 to 6): 1 row(s) added and 1 "
        "removed, in columns it does not read"
    )


def test_a_change_in_a_column_the_query_reads_stays() -> None:
    observed = Observation([rewritten(moved("site", "a", "b"))], T)
    assert read_through(observed, planned(JOINED)) == observed
    # A filter reads its column too.
    observed = Observation([rewritten(moved("max_temp", 40.0, 42.0))], T)
    assert read_through(observed, planned(JOINED + " where d.max_temp > 41")) == observed


def test_a_count_of_rows_changes_only_where_their_number_does() -> None:
    counted = planned("select count(*) as n from s.dim")
    replaced = Observation([rewritten(moved("site", "a", "b"))], T)
    assert read_through(replaced, counted).sources[0].unchanged
    added = NetChange(pa.table({"id": [2], "site": ["b"], "max_temp": [1.0], WEIGHT: [1]}))
    grown = Observation([rewritten(added)], T)
    assert read_through(grown, counted) == grown


def test_a_query_recomputed_whatever_changed_is_left_as_measured() -> None:
    observed = Observation([rewritten(moved("max_temp", 40.0, 42.0))], T)
    assert read_through(observed, Planner(NotPlanned("not incrementalizable", None))) == observed
    # No measured change to see through: nothing is planned.
    planner = planned(JOINED)
    appended = Observation([source(5, 6, added=10, name="s.dim")], T)
    assert read_through(appended, planner) == appended
    assert planner.calls == 0


#: A net change's rows: (site, max_temp, weight), NULLs among the values.
CHANGES = st.lists(
    st.tuples(st.sampled_from(["a", "b", None]), st.sampled_from([1.0, 2.0, None]), st.sampled_from([-1, 1])),
    max_size=8,
)


@given(CHANGES, st.sets(st.sampled_from(["site", "max_temp"])))
def test_a_change_cancels_through_columns_exactly_where_its_projection_does(changes, read) -> None:
    """Seen through the columns read, a change is none exactly where each projected row's
    weights add up to 0 (NULLs a value like any other, as GROUP BY takes them)."""
    rows = pa.table(
        {
            "site": pa.array([s for s, _, _ in changes], pa.string()),
            "max_temp": pa.array([t for _, t, _ in changes], pa.float64()),
            WEIGHT: pa.array([w for _, _, w in changes], pa.int64()),
        }
    )
    projected: Counter = Counter()
    for site, max_temp, weight in changes:
        projected[tuple(v for c, v in (("site", site), ("max_temp", max_temp)) if c in read)] += weight
    source = rewritten(NetChange(rows))
    plan = Planner(
        PlannedQuery(
            plan_query(f"select {', '.join(sorted(read)) or 'count(*) as n'} from s.dim", schema=SCHEMA),
            OutputKey(None),
        )
    )
    seen = read_through(Observation([source], T), plan).sources[0]
    assert seen.unchanged is not any(projected.values())
