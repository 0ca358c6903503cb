"""Snapshots loaded by the ``deltalake`` package: replayed forward from a table object this
process holds, else from the last checkpoint; and that object handed to a writer and back."""

from __future__ import annotations

import urllib.parse
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.delta_log.commits import Commits
from dbt.adapters.dyntable.delta_log.current_listing import CurrentListing, note_write
from dbt.adapters.dyntable.delta_log.errors import HistoryUnavailable, TableNotFound
from dbt.adapters.dyntable.delta_log.lru import Lru
from dbt.adapters.dyntable.delta_log.model import DataFile, DeletedRows, Snapshot
from dbt.adapters.dyntable.delta_log.protocol import COLUMN_MAPPING_MODE
from dbt.adapters.dyntable.delta_log.table_files import TableFiles
from dbt.adapters.dyntable.delta_log.value_ranges import bounded_columns, from_stats

#: Per location, the ``deltalake`` table object of the newest version loaded and the identity of
#: that version's commit: a later version is loaded from it by replaying only the commits between
#: (``load_as_version``), not from the last checkpoint. A source's next version, and a DT's version
#: after its MERGE, are one or a few commits on (docs/ARCHITECTURE.md, "Reading sources"). Taken
#: out while in use, so no two threads move one object.
REPLAY_BASE_CACHE_SIZE = 64
_replay_bases: "Lru[str, Tuple[int, str, DeltaTable]]" = Lru(REPLAY_BASE_CACHE_SIZE)


class DeltalakeSnapshots:
    """One table's snapshots as ``deltalake`` loads them, and the table objects it loads them
    with, kept per location to replay the next version from (``_replay_bases``)."""

    def __init__(self, files: TableFiles, listing: CurrentListing, commits: Commits) -> None:
        self.location = files.location
        self._files = files
        self._listing = listing
        self._commits = commits

    def load(self, version: int) -> Snapshot:
        """The table at ``version``, loaded by ``deltalake``; :class:`HistoryUnavailable` if its
        log cannot rebuild it."""
        table = self._replayed_to(version)
        try:
            if table is None:
                table = storage.delta_table(self.location, version=version)
        except (TableNotFoundError, DeltaError) as exc:
            # deltalake also says "not found" for a version whose log segment was cleaned up.
            if not self._listing.exists():
                raise TableNotFound(f"No Delta table at {self.location}: {exc}") from exc
            raise HistoryUnavailable(
                f"Version {version} of {self.location} cannot be rebuilt from its log "
                f"(cleaned up or not committed yet): {exc}"
            ) from exc
        snapshot = snapshot_of(table, version, self._files)
        self._keep_replay_base(table, version)
        return snapshot

    def _replayed_to(self, version: int) -> Optional[DeltaTable]:
        """The table at ``version``, replayed from the newest version up to it loaded (or
        written, :meth:`written`) in this process, if its commit is still the one loaded (a
        table re-created at the location writes new commits); None when there is no such base
        or the replay fails."""
        base = _replay_bases.pop(self.location)
        if base is None:
            return None
        if base[0] > version:
            self._keep_replay_base(base[2], base[0], base[1])
            return None
        base_version, identity, table = base
        try:
            if self._commits.commit_id(base_version) != identity:
                return None
            if base_version < version:
                table.load_as_version(version)
        except Exception:  # noqa: BLE001 - the shortcut only: the caller loads from the checkpoint
            return None
        return table

    def for_writing(self) -> DeltaTable:
        """The table at its latest version, for this process to write with deltalake: the one
        this process loaded there, when there is one (taken out of the cache while the writer
        moves it; hand it back with :meth:`written`), else opened from the log."""
        table = self._replayed_to(self._listing.latest_version())
        return table if table is not None else storage.delta_table(self.location)

    def written(self, table: DeltaTable) -> None:
        """``table`` committed a version from this process: the next snapshot of that version
        starts from it instead of the log."""
        note_write()
        self._keep_replay_base(table, table.version())

    def _keep_replay_base(self, table: DeltaTable, version: int, identity: Optional[str] = None) -> None:
        """Keep ``table`` (at ``version``) as the location's base, unless a newer one is kept."""
        if identity is None:
            try:
                identity = self._commits.commit_id(version)
            except HistoryUnavailable:
                return
        kept = _replay_bases.get(self.location)
        if kept is None or kept[0] <= version:
            _replay_bases.put(self.location, (version, identity, table))


def snapshot_of(table: DeltaTable, version: int, table_files: TableFiles) -> Snapshot:
    """The snapshot ``table`` (loaded at ``version``) holds, its files located in ``table_files``."""
    metadata, protocol = table.metadata(), table.protocol()
    actions = pa.table(table.get_add_actions(flatten=False))
    columns = set(actions.column_names)
    paths = actions.column("path").to_pylist()
    sizes = actions.column("size_bytes").to_pylist()
    records = actions.column("num_records").to_pylist() if "num_records" in columns else [None] * len(paths)
    partitions = actions.column("partition").to_pylist() if "partition" in columns else [{}] * len(paths)
    bounded = bounded_columns(
        table.schema().to_json(), (metadata.configuration or {}).get(COLUMN_MAPPING_MODE) or "none"
    )
    stats = [
        actions.column(name).to_pylist() if bounded and name in columns else [None] * len(paths)
        for name in ("min", "max", "null_count")
    ]
    files: Dict[str, DataFile] = {}
    for path, size, count, values, low, high, nulls in zip(paths, sizes, records, partitions, *stats):
        ranges = from_stats(low, high, nulls, count, bounded)
        files[path] = table_files.data_file(path, size, count, values or {}, ranges)
    vectors = "deletionVectors" in (protocol.reader_features or [])
    return Snapshot(
        version=version,
        table_id=str(metadata.id),
        schema_json=table.schema().to_json(),
        partition_columns=tuple(metadata.partition_columns),
        configuration=dict(metadata.configuration),
        files=files,
        deleted_rows=DeletedRows(
            rest=lambda: _deletion_vectors(table_files, version, str(metadata.id), paths)
        )
        if vectors
        else {},
        description=metadata.description or None,
        writer_features=tuple(protocol.writer_features or ()),
        min_writer_version=protocol.min_writer_version,
        min_reader_version=protocol.min_reader_version,
        reader_features=tuple(protocol.reader_features or ()),
    )


def _deletion_vectors(
    table_files: TableFiles, version: int, table_id: str, paths: List[str]
) -> Dict[str, "np.ndarray[Any, Any]"]:
    """Per path of a file of ``version`` carrying a deletion vector, the positions of the rows it
    masks, every vector of the version read by ``deltalake`` at once (``get_add_actions`` does not
    say which files have one). Asked for only where a read needs a file's vector that the
    version's own commits did not record (``DeletedRows``)."""
    table = storage.delta_table(table_files.location, version=version)
    if str(table.metadata().id) != table_id:
        raise HistoryUnavailable(
            f"{table_files.location} was re-created: its version {version} is another table's"
        )
    vectors = pa.table(table.deletion_vectors().read_all())
    # One flag per row of each file: unpacked by Arrow into one numpy array, never into a Python
    # list (a file of 10M rows took over a second that way).
    selections = vectors.column("selection_vector").combine_chunks()
    offsets = selections.offsets.to_numpy()
    keep = selections.values.to_numpy(zero_copy_only=False)
    by_uri = {urllib.parse.unquote(uri): i for i, uri in enumerate(vectors.column("filepath").to_pylist())}
    masked = {}
    for path in paths:
        i = by_uri.get(urllib.parse.unquote(table_files.file_uri(path)))
        if i is not None:
            masked[path] = np.flatnonzero(~keep[offsets[i] : offsets[i + 1]])
    return masked
