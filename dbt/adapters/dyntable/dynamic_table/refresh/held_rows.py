"""What a DT holds of a staged delta's rows, counted in this process (docs/ARCHITECTURE.md,
"Applying"): the DT's files read with Arrow, their live rows grouped with the delta's by the
columns a delta row is matched on, as the engine's null-safe join would pair them.

Where every read of a table is a job of its own that first rebuilds the table's new version
(delta-spark), counting in an engine job cost about 2 s for one row updated in a DT of a million
rows; reading the DT's files here costs tens of milliseconds. Only a DT whose files weigh at most
``data_files.IN_PROCESS_MAX_BYTES`` (``strategy.counts_held_rows_here``), and only values Arrow
reads and compares as the engine does: otherwise ``None``, and the engine counts.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dbt.adapters.dyntable.data_files import NotReadableInProcess, live_rows
from dbt.adapters.dyntable.dynamic_table.refresh.target import Target
from dbt.adapters.dyntable.vocabulary import WEIGHT

#: The delta row each matched value stands for (-1: a row of the DT), and whether it is the DT's.
_ROW, _HELD = "_dyn_row", "_dyn_held"
#: The one group of rows matched on no column.
_ALL = "_dyn_all"


def with_old(
    target: Target,
    rows: pa.Table,
    match: Sequence[str],
    old: str,
    key: Optional[Sequence[str]],
    per_key: Sequence[str],
) -> Optional[pa.Table]:
    """``rows`` (a staged delta) with column ``old``: the DT's rows holding each row's ``match``
    columns; with a ``key``, also ``per_key``'s three columns (the most rows held under the row's
    key, the delta's summed weight for it, and the row's rank within it, deletes first), for a
    DT ``strategy.counts_held_rows_here`` lets this process read. None where Arrow would not read
    its values as the engine does."""
    log = target.log()
    if log is None:
        return None
    snapshot = log.snapshot(log.latest_version())
    matched = rows.select(list(match))
    if any(pa.types.is_nested(f.type) for f in matched.schema):
        return None  # Arrow groups no struct, array or map
    try:
        in_dt = live_rows(snapshot, matched.schema)
    except NotReadableInProcess:
        return None
    counts = _counts(matched, _among(in_dt, matched))
    counted = rows.append_column(pa.field(old, pa.int64(), nullable=False), pa.array(counts, pa.int64()))
    if key is None:
        return counted
    return _with_per_key(counted, list(key), old, per_key)


def _among(in_dt: pa.Table, delta: pa.Table) -> pa.Table:
    """The rows of ``in_dt`` whose first column holds a value of ``delta``'s (all, matched on no
    column): the few a small delta can match, before grouping by every column."""
    if not delta.num_columns:
        return in_dt
    first, values = _comparable(in_dt.select([0])).column(0), _comparable(delta.select([0])).column(0)
    return in_dt.filter(pc.is_in(first, value_set=pc.unique(values), skip_nulls=False))


def _comparable(rows: pa.Table) -> pa.Table:
    """``rows`` with each float's negative zero made positive: the engine's join and grouping
    equal 0.0 and -0.0 (and NaN and NaN, as Arrow's grouping does)."""
    columns = [
        pc.add(column, pa.scalar(0.0, column.type)) if pa.types.is_floating(column.type) else column
        for column in rows.columns
    ]
    return pa.Table.from_arrays(columns, names=rows.column_names)


def _grouped(rows: pa.Table, by: List[str], aggregates: List[Tuple[str, str]]) -> pa.Table:
    """``rows`` (with ``_ROW``) grouped by ``by`` as the engine groups them, each group with
    ``aggregates`` and the list of its rows."""
    if not by:  # no key (a global aggregate's one row): all rows are one group
        by = [_ALL]
        rows = rows.append_column(_ALL, pa.array(np.zeros(rows.num_rows, np.int8)))
    compared = _comparable(rows.select(by)).append_column(_ROW, rows.column(_ROW))
    for name, _ in aggregates:
        compared = compared.append_column(name, rows.column(name))
    return compared.group_by(by, use_threads=False).aggregate([*aggregates, (_ROW, "list")])


def _row_lists(grouped: pa.Table) -> "tuple[np.ndarray, np.ndarray]":
    """Each group's delta rows (``_ROW`` values of 0 or more) and the group each belongs to."""
    lists = grouped.column(f"{_ROW}_list")
    lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False)
    members = pc.list_flatten(lists).to_numpy(zero_copy_only=False)
    group = np.repeat(np.arange(len(lengths)), lengths)
    delta = members >= 0
    return members[delta], group[delta]


def _counts(delta: pa.Table, in_dt: pa.Table) -> "np.ndarray":
    """Per row of ``delta``, the rows of ``in_dt`` equal to it (NULLs equal, as ``<=>``)."""
    if not delta.num_columns:  # matched on no column: every row of the DT
        return np.full(delta.num_rows, in_dt.num_rows, np.int64)
    both = pa.concat_tables(
        [
            delta.append_column(_ROW, pa.array(np.arange(delta.num_rows), pa.int64())),
            in_dt.cast(delta.schema).append_column(_ROW, pa.array(np.full(in_dt.num_rows, -1), pa.int64())),
        ]
    )
    both = both.append_column(_HELD, pc.if_else(pc.less(both.column(_ROW), 0), 1, 0))
    grouped = _grouped(both, delta.column_names, [(_HELD, "sum")])
    members, group = _row_lists(grouped)
    counts = np.zeros(delta.num_rows, np.int64)
    counts[members] = grouped.column(f"{_HELD}_sum").to_numpy()[group]
    return counts


def _with_per_key(rows: pa.Table, key: List[str], old: str, per_key: Sequence[str]) -> pa.Table:
    """``rows`` with, per row, the most rows the DT holds under its key, the delta's summed
    weight for the key, and the row's rank among the key's rows by weight (1: the first)."""
    numbered = rows.append_column(_ROW, pa.array(np.arange(rows.num_rows), pa.int64()))
    grouped = _grouped(numbered, key, [(old, "max"), (WEIGHT, "sum")])
    members, group = _row_lists(grouped)
    key_old, key_weight = np.zeros(rows.num_rows, np.int64), np.zeros(rows.num_rows, np.int64)
    key_old[members] = grouped.column(f"{old}_max").to_numpy()[group]
    key_weight[members] = grouped.column(f"{WEIGHT}_sum").to_numpy()[group]
    of_key = np.empty(rows.num_rows, np.int64)
    of_key[members] = group
    order = np.lexsort((rows.column(WEIGHT).to_numpy(), of_key))
    first = np.r_[True, of_key[order][1:] != of_key[order][:-1]]
    starts = np.maximum.accumulate(np.where(first, np.arange(len(order)), 0))
    rank = np.empty(rows.num_rows, np.int32)
    rank[order] = np.arange(len(order)) - starts + 1
    values = [pa.array(key_old, pa.int64()), pa.array(key_weight, pa.int64()), pa.array(rank, pa.int32())]
    for name, value in zip(per_key, values):
        rows = rows.append_column(pa.field(name, value.type, nullable=False), value)
    return rows
