"""What a DT holds of a delta's rows, counted in this process, equals what the engine's null-safe
join counts: NULLs equal NULLs, NaN equals NaN, 0.0 equals -0.0; and per key, the most rows held
under it, its summed weight and a rank putting its deletes first."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import List, Optional, Tuple

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.dyntable.dynamic_table.refresh.held_rows import _among, _counts, _with_per_key
from dbt.adapters.dyntable.vocabulary import WEIGHT

Row = Tuple[Optional[int], Optional[float]]
rows = st.lists(
    st.tuples(
        st.one_of(st.none(), st.integers(0, 2)),
        st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.5, math.nan])),
    ),
    max_size=30,
)


def table(values: List[Row]) -> pa.Table:
    return pa.table(
        {
            "k": pa.array([v[0] for v in values], pa.int64()),
            "x": pa.array([v[1] for v in values], pa.float64()),
        }
    )


def engine_equal(a: Row, b: Row) -> bool:
    """``a <=> b`` column by column, as Spark compares join keys."""

    def same(p, q):
        if p is None or q is None:
            return p is None and q is None
        if isinstance(p, float) and math.isnan(p):
            return isinstance(q, float) and math.isnan(q)
        return p == q  # 0.0 == -0.0

    return all(same(p, q) for p, q in zip(a, b))


@given(rows, rows)
def test_each_delta_row_counts_the_dt_rows_equal_to_it(delta: List[Row], in_dt: List[Row]) -> None:
    expected = [sum(engine_equal(row, held) for held in in_dt) for row in delta]
    assert list(_counts(table(delta), table(in_dt))) == expected
    # The DT's rows narrowed first to those whose first column the delta holds, as refreshes do,
    # whichever column comes first.
    for order in (["k", "x"], ["x", "k"]):
        ordered, held = table(delta).select(order), table(in_dt).select(order)
        assert list(_counts(ordered, _among(held, ordered))) == expected


@given(rows, rows)
def test_a_delta_matched_on_no_column_counts_every_dt_row(delta: List[Row], in_dt: List[Row]) -> None:
    assert list(_counts(table(delta).select([]), table(in_dt).select([]))) == [len(in_dt)] * len(delta)


@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.sampled_from([0.0, -0.0, math.nan, 2.0])),
            st.integers(0, 3),
            st.sampled_from([-1, 1]),
        ),
        max_size=20,
    )
)
def test_per_key_the_most_held_the_summed_weight_and_deletes_ranked_first(
    delta: List[Tuple[Optional[float], int, int]],
) -> None:
    rows_in = pa.table(
        {
            "x": pa.array([d[0] for d in delta], pa.float64()),
            "_dyn_old": pa.array([d[1] for d in delta], pa.int64()),
            WEIGHT: pa.array([d[2] for d in delta], pa.int64()),
        }
    )
    out = _with_per_key(rows_in, ["x"], "_dyn_old", ("key_old", "key_weight", "key_rank")).to_pylist()
    groups: "defaultdict[int, List[int]]" = defaultdict(list)
    for i, (x, _, _) in enumerate(delta):
        group = next(j for j, (y, _, _) in enumerate(delta) if engine_equal((x,), (y,)))
        groups[group].append(i)
    for members in groups.values():
        held = max(delta[i][1] for i in members)
        weight = sum(delta[i][2] for i in members)
        assert all(out[i]["key_old"] == held and out[i]["key_weight"] == weight for i in members)
        ranked = sorted(members, key=lambda i: out[i]["key_rank"])
        assert [out[i]["key_rank"] for i in ranked] == list(range(1, len(members) + 1))
        assert [delta[i][2] for i in ranked] == sorted(delta[i][2] for i in members)
