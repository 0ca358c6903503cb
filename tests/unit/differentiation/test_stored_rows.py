"""Where the DT stores an aggregate's, a window's or the first rows' result, the derivative reads
the old side from the DT: each source is read at v1 and as changes, never at v0 (the shapes are
checked on the engine in tests/functional/differentiation/test_operators.py)."""

from __future__ import annotations

import pytest

from dbt.adapters.dyntable.differentiation import differentiate, plan_query
from dbt.adapters.dyntable.differentiation.explain import SymbolicResolver, reads
from dbt.adapters.dyntable.differentiation.plan import Aggregate

FIRST_ROW = "select k, v{rn} from (select k, v, row_number() over (partition by k order by v) as rn from s.t) r where rn = 1"


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
        "select count(*) as n, sum(v) as s, max(v) as m from s.t",
        "select k, v, sum(v) over (partition by k) as s, row_number() over (partition by k order by v) as rn from s.t",
        FIRST_ROW.format(rn=""),
        FIRST_ROW.format(rn=", rn"),
    ],
)
def test_the_old_side_is_read_from_the_dt(sql: str) -> None:
    recomputed, stored = shapes(sql)
    assert recomputed == "s.t@changesx1 s.t@v0x1 s.t@v1x1"
    assert stored == "s.t@changesx1 s.t@v1x1"


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
