"""Where the DT stores an aggregate's, a window's or the first rows' result, the derivative reads
the old side from the DT: each source is read at v1 and as changes, never at v0 (the shapes are
checked on the engine in tests/functional/differentiation/test_operators.py)."""

from __future__ import annotations

import pytest

from dbt.adapters.dyntable.differentiation import differentiate, plan_query
from dbt.adapters.dyntable.differentiation.explain import SymbolicResolver, reads
from dbt.adapters.dyntable.differentiation.plan import Aggregate

FIRST_ROW = "select k, v{rn} from (select k, v, row_number() over (partition by k order by v) as rn from s.t) r where rn = 1"


class InsertsOnly(SymbolicResolver):
    """Every source only gained rows."""

    def is_insert_only(self, table: str) -> bool:
        return True


def shapes(sql: str) -> tuple[str, str]:
    """How the delta reads the sources without and with the DT's stored rows."""
    plan = plan_query(sql)
    return (
        reads(differentiate(plan, SymbolicResolver()).sql),
        reads(differentiate(plan, SymbolicResolver(), stored="s.dt").sql),
    )


@pytest.mark.parametrize(
    "sql",
    [
        "select k, count(distinct v) as d, avg(v) as a, bool_or(v > 1) as b from s.t group by k",
        "select k as key, sum(v) as total from s.t group by k",
        "select k, v, sum(v) over (partition by k) as s, row_number() over (partition by k order by v) as rn from s.t",
        FIRST_ROW.format(rn=""),
        FIRST_ROW.format(rn=", rn"),
    ],
)
def test_the_old_side_is_read_from_the_dt(sql: str) -> None:
    recomputed, stored = shapes(sql)
    assert recomputed == "s.t@changesx1 s.t@v0x1 s.t@v1x1"
    assert stored == "s.t@changesx1 s.t@v1x1"


def test_a_global_aggregate_is_replaced_by_its_recomputation() -> None:
    """-γ(Q|I0) + γ(Q|I1), or -DT + γ(Q|I1) with the DT's one row at hand: the changes are never
    read."""
    recomputed, stored = shapes("select count(*) as n, sum(v) as s, max(v) as m from s.t")
    assert recomputed == "s.t@v0x1 s.t@v1x1"
    assert stored == "s.t@v1x1"


@pytest.mark.parametrize(
    ("sql", "keys"),
    [
        (
            "select k, count(*) as n, count(v) as c, sum(v) as s, min(v) as lo, max(v) as hi from s.t group by k",
            ["k"],
        ),
        ("select n, key from (select k as key, count(*) as n from s.t group by k) g", ["key"]),
    ],
)
def test_inserts_accumulate_from_the_changes_alone(sql: str, keys: list[str]) -> None:
    """Insert-only changes under a stored GROUP BY of count/sum/min/max: the Z-set delta folds
    them into the DT's rows, and the accumulation's partials read the changes only."""
    plan = plan_query(sql)
    delta = differentiate(plan, InsertsOnly(), stored="s.dt")
    assert delta.accumulation is not None
    assert reads(delta.sql) == "s.t@changesx1" and "s.dt" in delta.sql
    assert reads(delta.accumulation.sql) == "s.t@changesx1" and "s.dt" not in delta.accumulation.sql
    assert delta.accumulation.keys == keys and sorted(delta.accumulation.columns) == sorted(plan.columns)


@pytest.mark.parametrize(
    "sql",
    [
        "select k, count(distinct v) as d from s.t group by k",  # does not fold
        "select count(*) as n from s.t",  # no key to merge on
        "select k, count(*) as n from s.t group by k having count(*) > 1",  # the DT stores no aggregate
        "select k, count(*) + 1 as n from s.t group by k",  # nor here
    ],
)
def test_what_does_not_accumulate(sql: str) -> None:
    delta = differentiate(plan_query(sql), InsertsOnly(), stored="s.dt")
    assert delta.accumulation is None


def test_updates_do_not_accumulate() -> None:
    plan = plan_query("select k, count(*) as n from s.t group by k")
    assert differentiate(plan, SymbolicResolver(), stored="s.dt").accumulation is None


@pytest.mark.parametrize(
    "sql",
    [
        # HAVING: the DT stores a filtered aggregate, not the aggregate's rows.
        "select k, count(*) as n from s.t group by k having count(*) > 1",
        # The DT does not store the window's input column v.
        "select k, sum(v) over (partition by k) as s from s.t",
        # rank() = 1 keeps ties: the window rule, over rows the DT does not store.
        "select k, v from (select k, v, rank() over (partition by k order by v) as rn from s.t) r where rn = 1",
    ],
)
def test_without_the_nodes_rows_the_old_side_is_recomputed(sql: str) -> None:
    recomputed, stored = shapes(sql)
    assert recomputed == stored == "s.t@changesx1 s.t@v0x1 s.t@v1x1"


def test_stored_group_keys_match_the_touched_keys_null_safely() -> None:
    plan = plan_query("select k as key, count(distinct v) as d from s.t group by k")
    aggregate = next(n for n in plan.root.walk() if isinstance(n, Aggregate))
    key = aggregate.keys[0][0]
    sql = differentiate(plan, SymbolicResolver(), stored="s.dt").sql
    assert f"`key` AS `{key}`" in sql  # the DT's column under the aggregate's name
    assert f"ON `{key}` <=> `_dyn_k`.`_dyn_k0`" in sql


@pytest.mark.parametrize(
    ("sql", "checked"),
    [
        (
            "select k, count(*) as n, count(v) as c, sum(v) as s, min(v) as lo, max(v) as hi from s.t group by k",
            True,
        ),
        ("select k, sum(v) as s, max(v) as hi from s.t group by k", True),  # emptiness by inserts
        ("select k, count(*) as n, avg(v) as a from s.t group by k", False),  # avg does not fold
        ("select count(*) as n, max(v) as m from s.t", False),  # a global aggregate keeps one row
    ],
)
def test_a_checked_fold_reads_the_changes_and_the_dt_only(sql: str, checked: bool) -> None:
    """Where AUTO may recompute, deletes fold into the stored groups under a check the engine
    makes (aggregate.fold_checked): the source is read as changes only, never at v1; aggregates
    that do not fold, and the global aggregate, read it as before."""
    plan = plan_query(sql)
    delta = differentiate(plan, SymbolicResolver(), stored="s.dt", checked_fold=True)
    unchecked = differentiate(plan, SymbolicResolver(), stored="s.dt")
    assert (reads(delta.sql) == "s.t@changesx1") is checked, reads(delta.sql)
    assert ("group-unfoldable" in delta.sql) is checked
    assert "s.t@v1" in reads(unchecked.sql) and "group-unfoldable" not in unchecked.sql
