"""What the log says, as values: a version's snapshot and its live files, and the change of the
table over an interval of versions."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Iterable, Mapping, Optional, Tuple

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
    has_deletion_vector: bool
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
    deleted_rows: Mapping[str, "np.ndarray[Any, Any]"] = field(default_factory=dict)
    """Per :attr:`DataFile.path` of a file with a deletion vector: the positions of the rows it
    masks (docs/ARCHITECTURE.md, "Reading sources")."""
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
    masked_rows: int = 0
    """The rows the deletion vectors of :attr:`masked` newly mask."""

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
