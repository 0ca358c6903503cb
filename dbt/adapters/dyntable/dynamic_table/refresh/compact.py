"""Compacting a DT's small files after the refreshes that wrote them (docs/ARCHITECTURE.md,
"Compaction").

Each incremental refresh that appends to a DT adds files (one per task writing them): refreshed
every minute, an append-only DT gains thousands a day, which every reader of it lists and opens.
So, as Delta's auto compaction does, a refresh that wrote the DT compacts it once one of its
partitions holds ``compact_after_files`` files (the ``auto_compact`` config) smaller than
``SMALL_FILE_BYTES`` that merge as a size tier. The compaction commit changes no rows: the DT's
frontier keeps the version its refresh produced, the next refresh finds no write outside
dbt-dyntable, and a downstream DT reads across it only what the refreshes changed
(``DeltaLog.interval``).

What it merges is a size tier (:func:`size_tier`): files of a partition from the smallest up, each
no larger than the smaller ones together. The files of the DT's first build, or of a rebuild, stay
as they are until the files appended since weigh as much; each row is rewritten a logarithmic
number of times, where merging every small file rewrote the whole partition each time.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Dict, List, Optional, Sequence, Tuple

from dbt.adapters.dyntable.delta_log import DataFile, DeltaLog, Snapshot
from dbt.adapters.dyntable.dynamic_table.failpoints import failpoint
from dbt.adapters.dyntable.dynamic_table.refresh.apply import DeltaApplier

#: Delta's auto compaction counts files under half its 128 MB target as small
#: (``spark.databricks.delta.autoCompact.minFileSize``).
SMALL_FILE_BYTES = 64 * 1024 * 1024
#: The most one merged file holds: Delta's auto compaction target (``maxFileSize``).
MERGED_FILE_BYTES = 128 * 1024 * 1024


def _small_per_partition(snapshot: Snapshot) -> List[List[DataFile]]:
    """The files under ``SMALL_FILE_BYTES`` of each partition of ``snapshot`` (a compaction merges
    files within a partition, never across), smallest first."""
    per_partition: Dict[Tuple[Tuple[str, object], ...], List[DataFile]] = defaultdict(list)
    for f in snapshot.files.values():
        if f.size_bytes < SMALL_FILE_BYTES:
            per_partition[tuple(sorted(f.partition_values.items(), key=lambda item: item[0]))].append(f)
    return [sorted(files, key=lambda f: (f.size_bytes, f.path)) for files in per_partition.values()]


def size_tier(files: Sequence[DataFile]) -> Tuple[List[DataFile], bool]:
    """The longest run of ``files`` (smallest first) that merges as a tier: two files, then each
    next one no larger than those before it in the run together, while the merged file stays
    under ``MERGED_FILE_BYTES``; and whether that bound ended it (the tier is full). A file with a
    deletion vector ends a run (the rows it masks would have to be dropped on the way)."""
    longest: List[DataFile] = []
    longest_full = False
    start = 0
    while start < len(files):
        run: List[DataFile] = []
        total = 0
        full = False
        for f in files[start:]:
            if total + f.size_bytes > MERGED_FILE_BYTES:
                full = True
                break
            if f.has_deletion_vector or (len(run) >= 2 and f.size_bytes > total):
                break
            run.append(f)
            total += f.size_bytes
        if len(run) > len(longest):
            longest, longest_full = run, full
        # A run starting inside this one has less before each file: it stops no later.
        start = max(start + len(run), start + 1)
    return longest, longest_full


def compaction_groups(snapshot: Snapshot, after_files: int) -> List[List[DataFile]]:
    """The files one compaction merges, one group per partition whose size tier holds at least
    ``after_files`` files (two at least) or is full: a tier of large appends may never count as
    many files."""
    groups = []
    for files in _small_per_partition(snapshot):
        tier, full = size_tier(files)
        if len(tier) >= 2 and (len(tier) >= after_files or full):
            groups.append(tier)
    return groups


def compact_if_due(applier: DeltaApplier, log: DeltaLog, after_files: int) -> Optional[str]:
    """Compact the DT when a partition's size tier is due (:func:`compaction_groups`); what it did,
    as the refresh's history records it, or None when it was not due."""
    groups = compaction_groups(log.snapshot(log.latest_version()), after_files)
    if not groups:
        return None
    failpoint("during_compaction")
    removed, added = applier.compact(groups)
    if not removed:
        return None
    merged = sum(f.size_bytes for group in groups for f in group)
    return (
        f"compacted {removed:,} small files ({merged / 1e6:,.1f} MB) into {added:,} "
        f"(version {log.latest_version()})"
    )
