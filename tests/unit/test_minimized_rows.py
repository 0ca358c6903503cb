"""Changes held in this process are minimized as the engine minimizes them: the copies a rewrite
made cancel, and what is left is one row per row instance, weighted +1 or -1."""

from __future__ import annotations

import struct
from collections import Counter
from typing import List, Optional, Tuple

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.dyntable.in_process_changes import cancelled_in_place, minimized_rows
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


Row = Tuple[Optional[int], Optional[str], Optional[float]]
rows_of_a_file = st.lists(
    st.tuples(
        st.one_of(st.none(), st.integers(0, 3)),
        st.one_of(st.none(), st.sampled_from(["a", "b"])),
        st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.5, float("nan")])),
    ),
    max_size=30,
)


def side(rows: List[Row], weight: int) -> pa.Table:
    return pa.table(
        {
            "k": pa.array([r[0] for r in rows], pa.int64()),
            "s": pa.array([r[1] for r in rows], pa.string()),
            "x": pa.array([r[2] for r in rows], pa.float64()),
            WEIGHT: pa.array([weight] * len(rows), pa.int32()),
        }
    )


def bits(row: Row) -> Tuple[object, ...]:
    return (row[0], row[1], None if row[2] is None else struct.pack("<d", row[2]))


def instances(table: pa.Table) -> "Counter[Tuple[object, ...]]":
    """Each row's weight summed, with floats by their bits (-0.0 and each NaN as written)."""
    total: "Counter[Tuple[object, ...]]" = Counter()
    columns = [table.column(c).to_pylist() for c in ("k", "s", "x", WEIGHT)]
    for k, s, x, weight in zip(*columns):
        total[bits((k, s, x))] += weight
    return Counter({row: n for row, n in total.items() if n})


@given(rows_of_a_file, st.data())
def test_rows_cancelled_in_place_leave_the_same_net_change(before: List[Row], data: st.DataObject) -> None:
    """A rewrite's rows (the file before, and after: some rows edited in place, some deleted or
    inserted) cancelled position by position leave what they held as a multiset, and none of the
    rows that stayed in place."""
    after = list(before)
    for _ in range(data.draw(st.integers(0, 3))):
        if after and data.draw(st.booleans()):
            at = data.draw(st.integers(0, len(after) - 1))
            after[at] = data.draw(rows_of_a_file.filter(bool))[0]
        elif data.draw(st.booleans()) and after:
            del after[data.draw(st.integers(0, len(after) - 1))]
        else:
            after.insert(data.draw(st.integers(0, len(after))), data.draw(rows_of_a_file.filter(bool))[0])
    added, removed = side(after, 1), side(before, -1)
    left = cancelled_in_place(added, removed)
    assert instances(pa.concat_tables(left)) == instances(pa.concat_tables([added, removed]))
    if len(before) == len(after):
        edited = sum(bits(b) != bits(a) for b, a in zip(before, after))  # -0.0 is not 0.0 here
        assert left[0].num_rows == left[1].num_rows <= edited


def test_a_file_rewritten_with_one_row_changed_leaves_that_row() -> None:
    before: List[Row] = [(i, "a", float(i)) for i in range(1000)]
    after = list(before)
    after[500] = (500, "b", 500.0)
    added, removed = cancelled_in_place(side(after, 1), side(before, -1))
    assert added.column("s").to_pylist() == ["b"] and removed.column("s").to_pylist() == ["a"]
    deleted = before[:10] + before[11:]
    added, removed = cancelled_in_place(side(deleted, 1), side(before, -1))
    assert added.num_rows == 0 and removed.column("k").to_pylist() == [10]
