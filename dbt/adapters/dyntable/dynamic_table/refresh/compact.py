"""Compacting a DT's small files after the refreshes that wrote it (docs/ARCHITECTURE.md,
"Compaction").

Each incremental refresh that appends to a DT adds files (one per task writing them): refreshed
every minute, an append-only DT gains thousands a day, which every reader of it lists and opens.
So, as Delta's auto compaction does, a refresh that wrote the DT compacts it once one of its
partitions holds ``compact_after_files`` files (the ``auto_compact`` config) smaller than
``SMALL_FILE_BYTES``. The compaction commit changes no rows: the DT's frontier keeps the version
its refresh produced, the next refresh finds no write outside dbt-dyntable, and a downstream DT
reads across it only what the refreshes changed (``DeltaLog.interval``).
"""

from __future__ import annotations

from collections import Counter
from typing import Optional

from dbt.adapters.dyntable.delta_log import DeltaLog, Snapshot
from dbt.adapters.dyntable.dynamic_table.failpoints import failpoint
from dbt.adapters.dyntable.dynamic_table.refresh.apply import DeltaApplier

#: Delta's auto compaction counts files under half its 128 MB target as small
#: (``spark.databricks.delta.autoCompact.minFileSize``); under every compactor's target (deltalake
#: writes 100 MB files), so a compaction that falls due always has files to merge.
SMALL_FILE_BYTES = 64 * 1024 * 1024


def small_files(snapshot: Snapshot) -> int:
    """The most files under ``SMALL_FILE_BYTES`` that one partition of ``snapshot`` holds (a
    compaction merges files within a partition, never across)."""
    per_partition = Counter(
        tuple(sorted(f.partition_values.items(), key=lambda item: item[0]))
        for f in snapshot.files.values()
        if f.size_bytes < SMALL_FILE_BYTES
    )
    return max(per_partition.values(), default=0)


def compact_if_due(applier: DeltaApplier, log: DeltaLog, after_files: int) -> Optional[str]:
    """Compact the DT when a partition holds ``after_files`` small files; what it did, as the
    refresh's history records it, or None when it was not due."""
    if small_files(log.snapshot(log.latest_version())) < after_files:
        return None
    failpoint("during_compaction")
    removed, added = applier.compact()
    if not removed:
        return None
    return f"compacted {removed:,} small files into {added:,} (version {log.latest_version()})"
