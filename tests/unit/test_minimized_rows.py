"""Changes held in this process are minimized as the engine minimizes them: the copies a rewrite
made cancel, and what is left is one row per row instance, weighted +1 or -1."""

from __future__ import annotations

from collections import Counter
from typing import List, Optional, Tuple

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.dyntable.changes import minimized_rows
from dbt.adapters.dyntable.vocabulary import WEIGHT

Change = Tuple[Optional[int], Optional[str], int]
changes = st.lists(
    st.tuples(
        st.one_of(st.none(), st.integers(0, 3)),
        st.one_of(st.none(), st.sampled_from(["a", "b"])),
        st.sampled_from([1, -1]),
    ),
    max_size=40,
)


def table(rows: List[Change]) -> pa.Table:
    return pa.table(
        {
            "k": pa.array([r[0] for r in rows], pa.int64()),
            "s": pa.array([r[1] for r in rows], pa.string()),
            WEIGHT: pa.array([r[2] for r in rows], pa.int32()),
        }
    )


def net(rows: List[Change]) -> "Counter[Tuple[Optional[int], Optional[str]]]":
    total: "Counter[Tuple[Optional[int], Optional[str]]]" = Counter()
    for k, s, weight in rows:
        total[(k, s)] += weight
    return Counter({row: n for row, n in total.items() if n})


@given(changes)
def test_the_net_change_one_row_per_instance(rows: List[Change]) -> None:
    minimized = minimized_rows(table(rows))
    assert minimized.schema == table(rows).schema
    held = list(zip(*(minimized.column(c).to_pylist() for c in ("k", "s", WEIGHT))))
    assert net(held) == net(rows)
    assert len(held) == sum(abs(n) for n in net(rows).values())  # nothing left to cancel
    assert all(w in (1, -1) for _, _, w in held)


def test_a_rewrite_of_the_same_rows_leaves_none() -> None:
    rows: List[Change] = [(1, "a", 1), (1, "a", -1), (None, None, -1), (None, None, 1), (2, "b", 1)] * 3
    assert minimized_rows(table(rows)).num_rows == 3  # the three copies of (2, "b") inserted
    assert minimized_rows(table(rows[:2])).num_rows == 0
