"""Changes this process holds, as Arrow tables of the table's columns and the weight
(docs/ARCHITECTURE.md, "Rewritten inputs"): a rewrite's rows that stayed in place cancelled
position by position, and the rest minimized as the engine minimizes changes.
"""

from __future__ import annotations

from typing import Any, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dbt.adapters.dyntable.vocabulary import WEIGHT


def minimized_rows(changes: pa.Table) -> pa.Table:
    """The net change of ``changes`` as one row per row instance weighted +1 or -1, as
    ``changes.minimized`` leaves the engine's: each row's weights summed by grouping every column."""
    keys = [c for c in changes.column_names if c != WEIGHT]
    summed = changes.group_by(keys, use_threads=False).aggregate([(WEIGHT, "sum")])
    sums = summed.column(f"{WEIGHT}_sum").to_numpy()
    at = np.repeat(np.arange(len(sums)), np.abs(sums))
    weights = pa.array(np.sign(sums[at]).astype(np.int32))
    return (
        summed.select(keys)
        .take(pa.array(at, pa.int64()))
        .append_column(changes.schema.field(WEIGHT), weights)
    )


def cancelled_in_place(added: pa.Table, removed: pa.Table) -> Tuple[pa.Table, pa.Table]:
    """``added`` and ``removed`` (a rewrite's rows, each in file order) without the rows equal at
    the same position (or, where their lengths differ, in their common first and last rows). A
    copy-on-write rewrite keeps its unchanged rows in place, so what is left is about the rows
    that changed, for :func:`minimized_rows` to group instead of every row rewritten; exact
    whatever the order, as a row cancelled is the same row on both sides. Values are compared
    exactly (floating point by their bits; NULL with NULL), which may leave equal rows
    uncancelled, never the reverse."""
    if not added.num_rows or not removed.num_rows:
        return added, removed
    if added.num_rows == removed.num_rows:
        kept = pa.array(~_same_rows(added, removed))
        return added.filter(kept), removed.filter(kept)
    overlap = min(added.num_rows, removed.num_rows)
    head = _same_rows(added.slice(0, overlap), removed.slice(0, overlap))
    first = int(np.argmin(head)) if not head.all() else overlap
    tail = _same_rows(added.slice(added.num_rows - overlap), removed.slice(removed.num_rows - overlap))
    last = int(np.argmin(tail[::-1])) if not tail.all() else overlap
    last = min(last, overlap - first)  # a row cancels once, in the head or in the tail
    return (
        added.slice(first, added.num_rows - first - last),
        removed.slice(first, removed.num_rows - first - last),
    )


def _same_rows(left: pa.Table, right: pa.Table) -> "np.ndarray[Any, Any]":
    """Per position, whether ``left`` and ``right`` (of one length) hold the same values in every
    column but the weight."""
    same = np.ones(left.num_rows, dtype=bool)
    for name in left.column_names:
        if name != WEIGHT:
            same &= _same_values(left.column(name).combine_chunks(), right.column(name).combine_chunks())
    return same


def _same_values(left: pa.Array, right: pa.Array) -> "np.ndarray[Any, Any]":
    kind = left.type
    if pa.types.is_floating(kind):
        bits = pa.int64() if kind.bit_width == 64 else pa.int32() if kind.bit_width == 32 else pa.int16()
        left, right = left.view(bits), right.view(bits)
    elif not (
        pa.types.is_primitive(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or pa.types.is_decimal(kind)
    ):
        return np.zeros(len(left), dtype=bool)  # nested values: left to the grouping
    equal = pc.fill_null(pc.equal(left, right), False)
    both_null = pc.and_(pc.is_null(left), pc.is_null(right))
    return np.asarray(pc.or_(equal, both_null).to_numpy(zero_copy_only=False), dtype=bool)
