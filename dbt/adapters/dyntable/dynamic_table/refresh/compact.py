"""Compacting a DT's small files after the refreshes that wrote them (docs/ARCHITECTURE.md,
"Compaction"): when, which files, and the compaction itself, by deltalake in this process or by
the engine's OPTIMIZE (``write.writes_in_process`` chooses, as for a refresh's rows).

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

import json
import posixpath
import time
import urllib.parse
import uuid
from collections import defaultdict
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs
from deltalake import DeltaTable
from deltalake.transaction import AddAction, RemoveAction

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.delta_log import DataFile, DeltaLog, Snapshot, commit_file
from dbt.adapters.dyntable.dynamic_table.failpoints import failpoint
from dbt.adapters.dyntable.dynamic_table.lifecycle import Action, State
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.refresh.deltalake_writer import written_here
from dbt.adapters.dyntable.dynamic_table.refresh.record import RefreshResult
from dbt.adapters.dyntable.dynamic_table.refresh.target import Target
from dbt.adapters.dyntable.dynamic_table.refresh.write import writes_in_process
from dbt.adapters.dyntable.dynamic_table.table_features import once
from dbt.adapters.dyntable.engines.base import Engine
from dbt.adapters.dyntable.vocabulary import first_line

#: Delta's auto compaction counts files under half its 128 MB target as small
#: (``spark.databricks.delta.autoCompact.minFileSize``).
SMALL_FILE_BYTES = 64 * 1024 * 1024
#: The most one merged file holds: Delta's auto compaction target (``maxFileSize``).
MERGED_FILE_BYTES = 128 * 1024 * 1024
#: The folder, inside the DT's and skipped by readers and VACUUM as every ``_`` folder is, where
#: deltalake writes the files a compaction merges (:func:`merge_files`).
COMPACTION_FOLDER = "_dyntable_compaction_"
#: The table settings that shape the files a writer writes: the columns their statistics cover,
#: and their target size.
FILE_SETTINGS = ("delta.dataSkippingNumIndexedCols", "delta.dataSkippingStatsColumns", "delta.targetFileSize")
#: Delta Spark's OPTIMIZE merges the files smaller than this session setting.
OPTIMIZE_MIN_FILE_SIZE = "spark.databricks.delta.optimize.minFileSize"


def _small_per_partition(snapshot: Snapshot) -> List[List[DataFile]]:
    """The files under ``SMALL_FILE_BYTES`` of each partition of ``snapshot`` (a compaction merges
    files within a partition, never across), smallest first."""
    per_partition: Dict[Tuple[Tuple[str, object], ...], List[DataFile]] = defaultdict(list)
    for f in snapshot.files.values():
        if f.size_bytes < SMALL_FILE_BYTES:
            per_partition[tuple(sorted(f.partition_values.items(), key=lambda item: item[0]))].append(f)
    return [sorted(files, key=lambda f: (f.size_bytes, f.path)) for files in per_partition.values()]


def size_tier(files: Sequence[DataFile], masks: Callable[[str], bool]) -> Tuple[List[DataFile], bool]:
    """The longest run of ``files`` (smallest first) that merges as a tier: two files, then each
    next one no larger than those before it in the run together, while the merged file stays
    under ``MERGED_FILE_BYTES``; and whether that bound ended it (the tier is full). A file with a
    deletion vector (``masks`` its path) ends a run (the rows it masks would have to be dropped on
    the way)."""
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
            if (len(run) >= 2 and f.size_bytes > total) or masks(f.path):
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
        if len(files) < max(2, after_files) and sum(f.size_bytes for f in files) <= MERGED_FILE_BYTES:
            # No run of these files can be due: which have deletion vectors is not asked, as
            # that reads every vector of the table (docs/ARCHITECTURE.md, "Reading sources").
            continue
        tier, full = size_tier(files, snapshot.has_deletion_vector)
        if len(tier) >= 2 and (len(tier) >= after_files or full):
            groups.append(tier)
    return groups


def compact_after(engine: Engine, dt: DynamicTable, result: RefreshResult) -> None:
    """Compact the DT after a refresh that wrote it, when its small files are due; what it did
    goes to the refresh's history. A compaction that fails leaves the DT as the refresh left it,
    and warns once per process."""
    after_files = dt.config.compact_after_files
    if after_files is None or result.state is not State.SUCCEEDED or result.action in (None, Action.NO_DATA):
        return
    log = engine.delta_log(dt.name)
    if log is None:
        return
    try:
        compacted = compact_if_due(Target(engine, dt, log), after_files)
    except Exception as exc:  # noqa: BLE001 - the refresh stands; compaction is housekeeping
        result.warnings += once(
            engine,
            dt.name,
            "compaction",
            f"Model '{dt.model}': dynamic table {dt.name} was refreshed, but compacting its small "
            f"files failed: {first_line(exc)}. Its rows are unchanged. Compact it with OPTIMIZE on "
            "JVM Spark, or set auto_compact: false on the model.",
        )
        return
    if compacted is not None:
        result.message = f"{result.message}; {compacted}" if result.message else compacted


def compact_if_due(target: Target, after_files: int) -> Optional[str]:
    """Compact the DT when a partition's size tier is due (:func:`compaction_groups`); what it did,
    as the refresh's history records it, or None when it was not due."""
    log = target.log()
    assert log is not None, "only an existing DT is compacted"
    groups = compaction_groups(log.snapshot(log.latest_version()), after_files)
    if not groups:
        return None
    failpoint("during_compaction")
    removed, added = _compact(target, log, groups)
    if not removed:
        return None
    merged = sum(f.size_bytes for group in groups for f in group)
    return (
        f"compacted {removed:,} small files ({merged / 1e6:,.1f} MB) into {added:,} "
        f"(version {log.latest_version()})"
    )


def _compact(target: Target, log: DeltaLog, groups: Sequence[Sequence[DataFile]]) -> Tuple[int, int]:
    """Rewrite each of ``groups`` (small files of one partition) into one file (more, beyond the
    writer's target size), changing no rows: one commit whose actions all have ``dataChange``
    false. Returns the files it removed and added; (0, 0) when the engine found nothing to merge."""
    if writes_in_process(target):
        table = log.for_writing()
        added = merge_files(table, log, groups)
        written_here(table, log)
        return sum(map(len, groups)), added
    # The engine's OPTIMIZE merges the files under its minimum size: just the groups' (and, in
    # another partition, files as small as theirs).
    largest = max(f.size_bytes for group in groups for f in group)
    before = log.latest_version()
    target.engine.execute(f"SET {OPTIMIZE_MIN_FILE_SIZE}={largest + 1}")
    try:
        target.engine.execute(f"OPTIMIZE {target.dt.relation}")
    finally:
        target.engine.execute(f"RESET {OPTIMIZE_MIN_FILE_SIZE}")
    after = log.latest_version()
    if after == before:
        return 0, 0
    metrics = log.operation_metrics(after)
    return metrics.get("numRemovedFiles", 0), metrics.get("numAddedFiles", 0)


def merge_files(writer: DeltaTable, log: DeltaLog, groups: Sequence[Sequence[DataFile]]) -> int:
    """Merge each of ``groups`` into one new file (more, beyond deltalake's target file size), in
    one commit of the new files' add actions and the old ones' remove actions, all with
    ``dataChange`` false; returns the files added.

    deltalake's own compaction merges every file under its target, the DT's large ones too. So
    each new file is written by deltalake into a table of its own in a folder of the DT's that
    readers skip (its statistics and layout as its other writes'), moved beside the DT's files,
    and committed here. A crash leaves that folder, which the next compaction deletes, or an
    uncommitted file, which VACUUM deletes."""
    fs, root = log.root
    for leftover in fs.get_file_info(pafs.FileSelector(root)):
        if leftover.base_name.startswith(COMPACTION_FOLDER):
            fs.delete_dir(leftover.path)
    snapshot = log.snapshot(log.latest_version())
    schema = pa.schema(writer.schema().to_arrow())
    partition_by = list(snapshot.partition_columns)
    # The DT's file settings, so the new files are written as its other files are.
    configuration = {k: v for k, v in snapshot.configuration.items() if k in FILE_SETTINGS}
    folder = f"{root}/{COMPACTION_FOLDER}{uuid.uuid4().hex}"
    actions: List[Any] = []
    added = 0
    try:
        for number, group in enumerate(groups):
            adds = _write_merged(log, schema, partition_by, configuration, group, f"{folder}/{number}")
            actions += [
                AddAction(
                    a["path"], a["size"], a["partitionValues"], a["modificationTime"], False, a["stats"]
                )
                for a in adds
            ]
            added += len(adds)
            # Files of no rows merge into none: their remove actions then say no partition.
            values = adds[0]["partitionValues"] if adds else None
            removed_at = int(time.time() * 1000)
            actions += [RemoveAction(f.path, False, removed_at, f.size_bytes, values) for f in group]
        writer.create_write_transaction(actions, "append", writer.schema(), partition_by or None)
        writer.update_incremental()  # the transaction leaves the table object at the version before
    finally:
        if fs.get_file_info(folder).type != pafs.FileType.NotFound:
            fs.delete_dir(folder)
    return added


def _write_merged(
    log: DeltaLog,
    schema: pa.Schema,
    partition_by: List[str],
    configuration: Dict[str, str],
    group: Sequence[DataFile],
    written: str,
) -> List[Any]:
    """The rows of ``group`` written by deltalake as a table of its own at ``written`` (a folder
    under the DT's), its files then moved beside the DT's; returns their add actions."""
    fs, root = log.root
    data_schema = pa.schema([f for f in schema if f.name not in partition_by])
    files = [log.file_path(f) for f in group]
    rows = pads.dataset([path for _, path in files], schema=data_schema, filesystem=files[0][0]).to_table()
    for name in partition_by:
        column = schema.field(name)
        value = group[0].partition_values.get(name)
        rows = rows.append_column(column, pa.array([value] * rows.num_rows, column.type))
    storage.write_delta(
        log.root_uri + written[len(root) :],
        rows.select(schema.names),
        partition_by=partition_by or None,
        configuration=configuration or None,
    )
    # deltalake splits rows beyond its target file size into several files.
    with fs.open_input_stream(f"{written}/{commit_file(0)}") as commit:
        adds = [a["add"] for a in map(json.loads, commit.read().decode().splitlines()) if "add" in a]
    for add in adds:
        relative = urllib.parse.unquote(add["path"])
        fs.create_dir(posixpath.dirname(f"{root}/{relative}"), recursive=True)
        fs.move(f"{written}/{relative}", f"{root}/{relative}")
    return adds
