"""What the log says, as values: a version's snapshot and its live files, and the change of the
table over an interval of versions."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple, TypeAlias

import numpy as np
from pyspark.sql.types import StructType

from dbt.adapters.dyntable.delta_log.protocol import COLUMN_MAPPING_MODE


class IntervalKind(str, Enum):
    """The change shapes of docs/ARCHITECTURE.md, "Reading sources", decided from file sets alone."""

    EMPTY = "EMPTY"
    """No file added or removed: the table's rows did not change."""
    ADDED_ONLY = "ADDED_ONLY"
    """Only inserts: read the added files, no consolidation needed."""
    REMOVED_ONLY = "REMOVED_ONLY"
    """Only deletes of whole files: read the removed files."""
    MIXED = "MIXED"
    """Files added and removed (updates, merges, partial deletes): the MINIMIZE shape."""


@dataclass(frozen=True)
class ValueRange:
    """Bounds of a column's values in a file (or files), from the writers' statistics: every
    non-null value lies in ``[low, high]`` (None when the file holds no non-null value), and
    ``nulls`` says whether any value is NULL. Integers, dates and timestamps only, whose
    statistics are exact or, for timestamps truncated to milliseconds, widened to bound.
    """

    low: Any
    high: Any
    nulls: bool

    def union(self, other: "ValueRange") -> "ValueRange":
        if self.low is None:
            return ValueRange(other.low, other.high, self.nulls or other.nulls)
        if other.low is None:
            return ValueRange(self.low, self.high, self.nulls or other.nulls)
        return ValueRange(min(self.low, other.low), max(self.high, other.high), self.nulls or other.nulls)


#: The positions of a file's rows, sorted (those a deletion vector masks).
Positions: TypeAlias = "np.ndarray[Any, Any]"


class DeletedRows(Mapping[str, Positions]):
    """Per path of a file with a deletion vector, the positions of the rows it masks, read when
    asked: the paths a snapshot's own commits set (their vector, or None for none) answer from
    what those commits recorded, and any other from ``rest``, the vectors of the snapshot it was
    built from, or a loader of every vector at once (``deltalake``'s, which hands each out as one
    flag per row of its file; docs/ARCHITECTURE.md, "Reading sources"). A refresh asks for the few
    files a change touched, so a table's other vectors are never expanded."""

    def __init__(
        self,
        known: Optional[Mapping[str, Optional[Callable[[], Positions]]]] = None,
        rest: "Optional[Mapping[str, Positions] | Callable[[], Mapping[str, Positions]]]" = None,
    ) -> None:
        self._known: Dict[str, Optional[Callable[[], Positions]]] = dict(known or {})
        self._read: Dict[str, Positions] = {}
        # Shared with the snapshots built on from this one, so the loader runs once for all.
        self._rest: List[Any] = [rest]
        self._live: Optional[frozenset[str]] = None

    def updated(
        self, known: Mapping[str, Optional[Callable[[], Positions]]], live: Iterable[str]
    ) -> "DeletedRows":
        """These rows after commits that set the vectors of ``known`` paths, the table's files
        then ``live``: the paths set before keep their vectors (and what was read of them); those
        no longer live are let go, so a snapshot built on from another does not hold its history."""
        built = DeletedRows()
        built._live = frozenset(live)
        built._known = {p: read for p, read in {**self._known, **known}.items() if p in built._live}
        built._read = {p: rows for p, rows in self._read.items() if p in built._known and p not in known}
        built._rest = self._rest
        return built

    def get(self, path: str, default: Any = None) -> Any:
        if self._live is not None and path not in self._live:
            return default
        if path not in self._known:
            return self._rest_rows().get(path, default)
        read = self._known[path]
        if read is None:
            return default
        if path not in self._read:
            self._read[path] = read()
        return self._read[path]

    def __getitem__(self, path: str) -> Positions:
        found: Optional[Positions] = self.get(path)
        if found is None:
            raise KeyError(path)
        return found

    def __contains__(self, path: object) -> bool:
        # A path the commits set has a vector when they recorded one: known without reading it.
        if not isinstance(path, str) or (self._live is not None and path not in self._live):
            return False
        if path in self._known:
            return self._known[path] is not None
        return path in self._rest_rows()

    def __iter__(self) -> Iterator[str]:
        paths = list(self._known) + [p for p in self._rest_rows() if p not in self._known]
        return iter([p for p in paths if p in self])

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def _rest_rows(self) -> Mapping[str, Positions]:
        if callable(self._rest[0]):
            self._rest[0] = self._rest[0]()
        return self._rest[0] or {}


@dataclass(frozen=True)
class DataFile:
    """One live data file of a snapshot (an ``add`` action)."""

    path: str
    """As recorded in the log: URI-encoded, relative to the table root unless absolute."""
    uri: str
    """Absolute URI an engine reads (``file:///...`` for local tables)."""
    size_bytes: int
    num_records: Optional[int]
    """From the file's statistics; None when the writer recorded none."""
    partition_values: Mapping[str, Any]
    """Typed Python values (``date``, aware ``datetime`` for timestamps, ``Decimal`` ...)."""
    ranges: Mapping[str, ValueRange] = field(default_factory=dict)
    """Per column (lower-case name) of an integer, date or timestamp type, where its statistics
    bound it: the range of its values (``value_ranges``)."""


@dataclass(frozen=True)
class Snapshot:
    """What a version of the table is: identity, schema, configuration and live files."""

    version: int
    table_id: str
    schema_json: str
    """The Delta schema as Spark's StructType JSON."""
    partition_columns: Tuple[str, ...]
    configuration: Mapping[str, str]
    files: Mapping[str, DataFile]
    """Keyed by :attr:`DataFile.path`."""
    deleted_rows: Mapping[str, Positions] = field(default_factory=dict)
    """Per :attr:`DataFile.path` of a file with a deletion vector: the positions of the rows it
    masks, read when asked (:class:`DeletedRows`; docs/ARCHITECTURE.md, "Reading sources")."""
    description: Optional[str] = None
    """The table's comment."""
    writer_features: Tuple[str, ...] = ()
    """The protocol's writer table features (``clustering``, ``deletionVectors``, ...)."""
    min_writer_version: int = 2
    """The protocol's writer version: 3 to 6 carry features by number (CHECK constraints; change
    data feed and generated columns; column mapping; identity columns), 7 lists them."""
    min_reader_version: int = 1
    """The protocol's reader version: above 1 a reader needs more than the data files (column
    mapping, deletion vectors, other reader features)."""
    reader_features: Tuple[str, ...] = ()
    """The protocol's reader table features (``deletionVectors``, ...), at reader version 3."""

    @property
    def schema(self) -> StructType:
        return StructType.fromJson(json.loads(self.schema_json))

    def has_deletion_vector(self, path: str) -> bool:
        """Whether the live file ``path`` has rows masked by a deletion vector."""
        return path in self.deleted_rows

    @property
    def column_mapping_mode(self) -> str:
        return (self.configuration.get(COLUMN_MAPPING_MODE) or "none").lower()

    @property
    def rows_are_files_rows(self) -> bool:
        """Its rows are its data files' rows: reader protocol 1, or deletion vectors enabled (the
        reader feature of a dynamic table) where no file has one yet."""
        if self.min_reader_version == 1:
            return True
        return (
            set(self.reader_features) == {"deletionVectors"}
            and self.column_mapping_mode == "none"
            and not self.deleted_rows
        )


@dataclass(frozen=True)
class Interval:
    """The change of a table over versions ``(v0, v1]`` as added and removed files.

    Rows of ``added`` count +1, rows of ``removed`` -1; a row copied unchanged by a
    copy-on-write rewrite appears on both sides and cancels when consolidated. Check
    :attr:`undifferentiable_reason` first: when it is set, the file sets may be incomplete
    and the consumer must recompute (REINITIALIZE) instead.
    """

    v0: int
    v1: int
    added: Tuple[DataFile, ...] = ()
    removed: Tuple[DataFile, ...] = ()
    undifferentiable_reason: Optional[str] = None
    masked: Tuple[DataFile, ...] = ()
    """Files live at both ends whose deletion vector grew: the rows it newly masks count -1."""
    changed_rows: Optional[int] = None
    """The rows the interval's commits removed or added, by their writers' metrics
    (:attr:`.commits.Commit.changed_rows`); None when a commit did not record them."""
    newly_masked: Mapping[str, Positions] = field(default_factory=dict)
    """Per path of :attr:`masked`, the positions of the rows its deletion vector newly masks."""

    @property
    def masked_rows(self) -> int:
        """The rows the deletion vectors of :attr:`masked` newly mask."""
        return sum(len(rows) for rows in self.newly_masked.values())

    @property
    def kind(self) -> IntervalKind:
        removes = self.removed or self.masked
        if self.added and removes:
            return IntervalKind.MIXED
        if self.added:
            return IntervalKind.ADDED_ONLY
        if removes:
            return IntervalKind.REMOVED_ONLY
        return IntervalKind.EMPTY

    @property
    def differentiable(self) -> bool:
        return self.undifferentiable_reason is None

    @property
    def added_rows(self) -> Optional[int]:
        return total_rows(self.added)

    @property
    def removed_rows(self) -> Optional[int]:
        """Rows of removed files, and the rows deletion vectors newly mask: those are read from
        the row groups holding them, not with their whole files (``changes.changes_dataframe``)."""
        removed = total_rows(self.removed)
        return None if removed is None else removed + self.masked_rows

    def value_range(self, column: str) -> Optional[ValueRange]:
        """The range of ``column``'s values among the changed rows: the union of its range in
        every added, removed and newly masked file; None where a file's statistics do not bound
        it."""
        found: Optional[ValueRange] = None
        for data_file in self.added + self.removed + self.masked:
            bounded = data_file.ranges.get(column.lower())
            if bounded is None:
                return None
            found = bounded if found is None else found.union(bounded)
        return found

    @property
    def added_bytes(self) -> int:
        return sum(f.size_bytes for f in self.added)

    @property
    def removed_bytes(self) -> int:
        """Bytes of removed files, and the newly masked rows' share of their files' bytes."""
        masked_bytes = sum(f.size_bytes for f in self.masked)
        masked_files_rows = total_rows(self.masked)
        if masked_files_rows:
            masked_bytes = masked_bytes * min(self.masked_rows, masked_files_rows) // masked_files_rows
        return sum(f.size_bytes for f in self.removed) + masked_bytes


def total_rows(files: Tuple[DataFile, ...]) -> Optional[int]:
    """The rows of ``files`` by their statistics; None when a file has none."""
    return known_sum(f.num_records for f in files)


def known_sum(counts: Iterable[Optional[int]]) -> Optional[int]:
    """The sum of ``counts``; None when any is unknown."""
    known = list(counts)
    return None if any(c is None for c in known) else sum(c for c in known if c is not None)
