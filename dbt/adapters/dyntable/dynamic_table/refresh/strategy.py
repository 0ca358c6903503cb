"""Which path a delta takes to the DT (docs/ARCHITECTURE.md, "Applying"). Pure: AUTO's estimate
(``decide.py``) and the pipeline choose by the same rules, so the estimate counts the reads of
the path the refresh then takes.
"""

from __future__ import annotations

from enum import Enum
from typing import Optional, Sequence

from dbt.adapters.dyntable import data_files
from dbt.adapters.dyntable.differentiation import DeltaQuery
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.engines.base import Capabilities


class InEngine(str, Enum):
    """How a delta is applied by the engine alone, its rows never brought to this process to be
    validated (docs/ARCHITECTURE.md, "Applying")."""

    APPEND = "append"
    """It only inserts, matched on whole rows or a declared key: one INSERT ... SELECT."""
    MERGE = "merge"
    """It is matched on a key the plan proves: one MERGE checked by the engine."""
    ACCUMULATE = "accumulate"
    """It only inserts under a stored GROUP BY of count, sum, min and max: one MERGE on the
    group keys folds its partials into the stored groups, its source never reading the DT."""


def appends(insert_only: bool, key: Optional[Sequence[str]], declared_by: Optional[str]) -> bool:
    """Whether a delta is applied by appending it, never reading the DT: it only inserts, and
    the DT is matched on whole rows or on a declared key (appends through filters and joins)."""
    return insert_only and (key is None or declared_by is not None)


def counts_held_rows_here(capabilities: Capabilities, dt_bytes: int) -> bool:
    """Whether what a DT of ``dt_bytes`` holds of a staged delta is counted in this process from
    its files (``held_rows``) instead of by an engine job reading it: where the engine's every read
    is a job of its own (``Capabilities.counts_held_rows_in_process``), for a DT this process may
    read (``data_files.IN_PROCESS_MAX_BYTES``)."""
    return capabilities.counts_held_rows_in_process and dt_bytes <= data_files.IN_PROCESS_MAX_BYTES


def in_engine(
    dt: DynamicTable,
    guarded: bool,
    delta: DeltaQuery,
    key: Optional[Sequence[str]],
    declared_by: Optional[str],
    capabilities: Capabilities,
    dt_bytes: int,
) -> Optional[InEngine]:
    """How ``dt``'s delta is applied by the engine alone; None when it comes to this process: the
    change fuse counts its rows first (``guarded``), ``immutable_where`` filters them, it
    deletes rows matched whole or on a declared key, or it is matched on a proven key in a DT
    of ``dt_bytes`` this process merges into for less (:func:`merges_here`)."""
    if guarded or dt.config.immutable_where is not None:
        return None
    if appends(delta.insert_only, key, declared_by):
        return InEngine.APPEND
    if key is None or declared_by is not None:
        return None
    accumulation = delta.accumulation
    if accumulation is not None and sorted(c.lower() for c in accumulation.keys) == sorted(
        c.lower() for c in key
    ):
        return InEngine.ACCUMULATE
    return None if merges_here(capabilities, dt_bytes) else InEngine.MERGE


def merges_here(capabilities: Capabilities, dt_bytes: int) -> bool:
    """Whether a delta on a proven key is staged and merged by this process rather than by the
    engine's MERGE: where this process counts what the DT holds of it from its files
    (:func:`counts_held_rows_here`: the engine's every job is dear, the DT small) and may write
    it (``Capabilities.merge_in_process``). One job staging the delta and deltalake's merge, then,
    against delta-spark's MERGE of two or more (1.5-3 s on a DT of 31 rows), and none at all when
    the staged delta is empty."""
    return capabilities.merge_in_process and counts_held_rows_here(capabilities, dt_bytes)
