"""Changes of Delta sources as Spark relations, for any Spark engine.

The differentiation engine asks, per source table, for the table before and after the refresh
interval and for its changes: the table's columns plus ``_dyn_weight`` (+1 for a row instance that
appeared, -1 for one that went away). Everywhere, changes come from file sets (docs/ARCHITECTURE.md,
"Reading sources"): rows of the files added over ``(v0, v1]`` count +1, rows of removed files -1,
read with ``spark.read.parquet`` so Sail and JVM Spark behave alike (one scan per Arrow schema the
files declare where the engine's scan merges them). Where the engine has a change
data feed and the table kept it on for the whole interval, updates are read from the feed instead,
which avoids re-reading every row of a rewritten file.
"""

from __future__ import annotations

import functools
import hashlib
import re
import urllib.parse
import uuid
from dataclasses import dataclass
from datetime import datetime
from functools import reduce
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DecimalType,
    IntegerType,
    MapType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.delta_log import DataFile, DeltaLog, Interval, IntervalKind, Snapshot
from dbt.adapters.dyntable.engines.base import Capabilities
from dbt.adapters.dyntable.vocabulary import (
    RESERVED_COLUMNS,
    WEIGHT,
    WEIGHT_SUM,
    quote,
    quoted_table,
    table_name,
)

_COPY = "_dyn_weight_copy"
#: Change-feed row kinds that add a row instance (+1) and that take one away (-1).
ADDS = ("insert", "update_postimage")
REMOVES = ("delete", "update_preimage")


class UndifferentiableSource(ValueError):
    """A source's interval cannot be turned into changes; the refresh must recompute instead."""

    def __init__(self, table: str, reason: str) -> None:
        super().__init__(f"{table}: {reason}")
        self.table = table
        self.reason = reason


class ChangeDataFeedUnavailable(RuntimeError):
    """The engine or the table's configuration cannot serve a change-data-feed read."""


def _col(name: str) -> Column:

    return F.col(quote(name))


# -- file sets -------------------------------------------------------------------------------------


def changes_dataframe(
    spark: SparkSession,
    log: DeltaLog,
    interval: Interval,
    *,
    minimize: bool = True,
    capabilities: Optional[Capabilities] = None,
) -> DataFrame:
    """The rows of ``interval`` with their weights, as a DataFrame.

    ADDED_ONLY and REMOVED_ONLY intervals read one side only and need no consolidation. A MIXED
    interval carries every row a copy-on-write rewrite copied on both sides; with ``minimize``
    those pairs are cancelled here (the minimized shape) so that later joins and aggregates
    see only real changes. Minimising needs all columns groupable, so tables with map columns
    keep the redundant form, which is still a correct multiset delta. ``capabilities`` are the
    engine's (None: any engine's, see :func:`_read_files`).
    """
    if interval.undifferentiable_reason is not None:
        raise UndifferentiableSource(log.location, interval.undifferentiable_reason)
    after = log.snapshot(interval.v1)
    schema = after.schema
    clash = (RESERVED_COLUMNS | {_COPY}).intersection(f.name for f in schema.fields)
    if clash:
        raise UndifferentiableSource(log.location, f"column name(s) {sorted(clash)} are reserved")
    before = log.snapshot(interval.v0)
    sides: List[DataFrame] = []
    if interval.added:
        sides.extend(_read_files(spark, after, interval.added, +1, capabilities))
    if interval.removed:
        sides.extend(_read_files(spark, before, interval.removed, -1, capabilities))
    for data_file in interval.masked:
        masked_before = before.deleted_rows.get(data_file.path, np.empty(0, np.int64))
        newly = np.setdiff1d(after.deleted_rows.get(data_file.path, np.empty(0, np.int64)), masked_before)
        sides.extend(_read_rows(spark, after, data_file, newly, -1))
    if not sides:
        return spark.createDataFrame([], _with_weight(schema))
    changes = reduce(lambda left, right: left.unionAll(right), sides)
    if minimize and interval.kind is IntervalKind.MIXED and all(groupable(f.dataType) for f in schema.fields):
        changes = minimized(changes, [f.name for f in schema.fields])
    return changes


def register_changes(
    spark: SparkSession,
    log: DeltaLog,
    v0: int,
    v1: int,
    view_name: str,
    *,
    interval: Optional[Interval] = None,
    minimize: bool = True,
    capabilities: Optional[Capabilities] = None,
) -> str:
    """Create temp view ``view_name`` with the changes of ``(v0, v1]`` and return its name.

    Pass ``interval`` when it was already computed for the same versions, to skip the log read.
    """
    interval = log.interval(v0, v1) if interval is None else _of_versions(interval, v0, v1)
    changes = changes_dataframe(spark, log, interval, minimize=minimize, capabilities=capabilities)
    changes.createOrReplaceTempView(view_name)
    return view_name


def _of_versions(interval: Interval, v0: int, v1: int) -> Interval:
    """``interval``, checked to be the one of ``(v0, v1]`` it is passed for."""
    if (interval.v0, interval.v1) != (v0, v1):
        raise ValueError(f"interval ({interval.v0}, {interval.v1}] is not ({v0}, {v1}]")
    return interval


def inserts_only(changes: pa.Table) -> bool:
    """Whether changes this process holds (columns plus the weight) only insert rows."""
    return changes.num_rows == 0 or bool(pc.min(changes.column(WEIGHT)).as_py() > 0)


def minimized(changes: DataFrame, columns: Sequence[str]) -> DataFrame:
    """Seed 001's MINIMIZE shape: cancel the +1/-1 pairs of identical rows a copy-on-write rewrite
    leaves, keeping one +1/-1 row per remaining row instance (the change views' contract; unlike
    :func:`~dbt.adapters.dyntable.vocabulary.consolidate`, which keeps one row per tuple)."""

    keys = [_col(c) for c in columns]
    summed = changes.groupBy(*keys).agg(F.sum(_col(WEIGHT)).alias(WEIGHT_SUM)).where(_col(WEIGHT_SUM) != 0)
    expanded = summed.select(
        *keys,
        F.when(_col(WEIGHT_SUM) > 0, F.lit(1)).otherwise(F.lit(-1)).cast("int").alias(WEIGHT),
        F.explode(F.sequence(F.lit(1), F.abs(_col(WEIGHT_SUM)).cast("int"))).alias(_COPY),
    )
    return expanded.select(*keys, _col(WEIGHT))


def _read_files(
    spark: SparkSession,
    snapshot: Snapshot,
    files: Sequence[DataFile],
    weight: int,
    capabilities: Optional[Capabilities],
) -> List[DataFrame]:
    """Read ``files`` with the snapshot's schema, adding the partition columns the Parquet files
    of partitioned tables do not hold: one read per distinct partition, since the values come
    from the log and differ per file. Where the engine's scan merges the Arrow schemas the files
    declare (``Capabilities.parquet_scan_merges_file_types``; so too with no ``capabilities``),
    also one read per declared schema. A file with a deletion vector is read without the rows it
    masks."""

    by_declared_types = capabilities is None or capabilities.parquet_scan_merges_file_types
    groups: Dict[Tuple[Tuple[Any, ...], str], List[str]] = {}
    frames: List[DataFrame] = []
    for data_file in files:
        masked = snapshot.deleted_rows.get(data_file.path)
        if masked is not None:
            frames.extend(_read_rows(spark, snapshot, data_file, masked, weight, keep=False))
            continue
        values = tuple(data_file.partition_values.get(c) for c in snapshot.partition_columns)
        declared = _declared_types(data_file.uri) if by_declared_types else ""
        groups.setdefault((values, declared), []).append(data_file.uri)
    file_schema = _file_schema(snapshot)
    for (values, _), uris in groups.items():
        partitions = dict(zip(snapshot.partition_columns, values))
        per_scan = (capabilities.files_per_scan if capabilities else 0) or len(uris)
        for start in range(0, len(uris), per_scan):  # Capabilities.files_per_scan
            batch = uris[start : start + per_scan]
            frame = spark.read.schema(file_schema).parquet(*[_readable_path(uri) for uri in batch])
            frames.append(_with_partitions(frame, snapshot, partitions, weight))
    return frames


def _file_schema(snapshot: Snapshot) -> StructType:
    """The columns a data file of the snapshot holds: all but the partition columns."""
    return StructType([f for f in snapshot.schema.fields if f.name not in snapshot.partition_columns])


@functools.lru_cache(maxsize=65536)
def _declared_types(uri: str) -> str:
    """The Arrow schema a data file declares in its footer, metadata left out. A data file is
    written once under a new name, so its answer is kept by URI: for as many files as a run of
    ten thousand small commits adds, each read by several DTs."""
    filesystem, path = storage.arrow(uri)
    declared: pa.Schema = pq.read_schema(path, filesystem=filesystem)
    return str(declared.remove_metadata().to_string(show_field_metadata=False))


def _with_partitions(
    frame: DataFrame, snapshot: Snapshot, values: Mapping[str, Any], weight: int
) -> DataFrame:
    """``frame``'s columns in the snapshot's order, the partition columns as ``values``, and the
    weight."""
    columns = [
        _partition_literal(values[f.name], f.dataType).alias(f.name)
        if f.name in values
        else _col(f.name).cast(f.dataType).alias(f.name)
        for f in snapshot.schema.fields
    ]
    return frame.select(*columns, F.lit(weight).cast("int").alias(WEIGHT))


def _read_rows(
    spark: SparkSession,
    snapshot: Snapshot,
    data_file: DataFile,
    positions: "np.ndarray[Any, Any]",
    weight: int,
    keep: bool = True,
) -> List[DataFrame]:
    """The rows at ``positions`` of one data file (or, with ``keep`` off, all its other rows):
    a deletion vector names rows by position, which only a read of the file in order can
    match, so the file is read here, through Arrow (no frame when no row is left): the
    snapshot's columns only, in plain Arrow types."""
    filesystem, path = storage.arrow(data_file.uri)
    columns = _file_schema(snapshot).names
    if keep:
        rows = _rows_at(filesystem, path, columns, positions)
    else:
        rows = pq.read_table(path, filesystem=filesystem, columns=columns)
        rows = rows.cast(pa.schema([f.with_type(_plain(f.type)) for f in rows.schema]))
        kept = np.ones(rows.num_rows, dtype=bool)
        kept[positions[positions < rows.num_rows]] = False
        rows = rows.filter(pa.array(kept))
    if rows.num_rows == 0:
        return []
    frame = spark.createDataFrame(rows)
    return [_with_partitions(frame, snapshot, dict(data_file.partition_values), weight)]


def _rows_at(
    filesystem: pafs.FileSystem, path: str, columns: Sequence[str], positions: "np.ndarray[Any, Any]"
) -> pa.Table:
    """The rows at ``positions`` of a Parquet file, in that order and in plain Arrow types,
    reading only the row groups that hold them: one row updated in a file of millions reads one
    row group, not the file."""
    with filesystem.open_input_file(path) as source:
        parquet = pq.ParquetFile(source)
        sizes = [parquet.metadata.row_group(g).num_rows for g in range(parquet.num_row_groups)]
        starts = np.cumsum([0, *sizes])
        group = np.searchsorted(starts, positions, side="right") - 1
        wanted = np.unique(group)
        rows = parquet.read_row_groups([int(g) for g in wanted], columns=list(columns))
    rows = rows.cast(pa.schema([f.with_type(_plain(f.type)) for f in rows.schema]))  # take needs them
    # Where each wanted group starts among the rows read.
    read_from = np.concatenate([[0], np.cumsum(starts[wanted + 1] - starts[wanted])[:-1]])
    at = read_from[np.searchsorted(wanted, group)] + positions - starts[group]
    return rows.take(pa.array(at, pa.int64()))


def _plain(data_type: pa.DataType) -> pa.DataType:
    """``data_type`` without the view, large and dictionary encodings a writer may declare (the
    ``deltalake`` package writes view types): the same values, in the types PySpark's Arrow
    conversion takes."""
    if pa.types.is_string_view(data_type) or pa.types.is_large_string(data_type):
        return pa.string()
    if pa.types.is_binary_view(data_type) or pa.types.is_large_binary(data_type):
        return pa.binary()
    if pa.types.is_dictionary(data_type):
        return _plain(data_type.value_type)
    if (
        pa.types.is_list(data_type)
        or pa.types.is_large_list(data_type)
        or pa.types.is_list_view(data_type)
        or pa.types.is_large_list_view(data_type)
    ):
        return pa.list_(data_type.value_field.with_type(_plain(data_type.value_type)))
    if pa.types.is_map(data_type):
        return pa.map_(
            data_type.key_field.with_type(_plain(data_type.key_type)),
            data_type.item_field.with_type(_plain(data_type.item_type)),
        )
    if pa.types.is_struct(data_type):
        return pa.struct([field.with_type(_plain(field.type)) for field in data_type])
    return data_type


def _readable_path(uri: str) -> str:
    """How ``spark.read.parquet`` finds a data file on every engine.

    A data file's URI is the table's URI plus the path the log records, which is URL-encoded
    (a partition value "eu west" is the folder ``region=eu west`` on disk and ``region=eu%20west``
    in the log). JVM Spark reads a path string as a Hadoop path, whose percent signs are literal,
    so the encoded URI names no file there; a local file is therefore given as its plain path,
    decoded once, which JVM Spark and Sail both read. An object store's URI passes as it is,
    S3's as Hadoop's ``s3a://``, which JVM Spark and Sail both read (docs/ARCHITECTURE.md,
    "Object storage").
    """
    if uri.startswith("file:"):
        return urllib.parse.unquote(urllib.parse.urlparse(uri).path)
    return storage.spark_location(uri)


def _partition_literal(value: Any, data_type: DataType) -> Column:
    """A typed literal for a partition value as ``deltalake`` parsed it from the log.

    Timestamps travel as text with an explicit offset (or none, for TIMESTAMP_NTZ) so neither the
    client's nor the session's time zone can shift them; decimals as text to keep their digits.
    """

    if value is None:
        return F.lit(None).cast(data_type)
    if isinstance(data_type, (TimestampType, TimestampNTZType)) and isinstance(value, datetime):
        return F.lit(value.isoformat(sep=" ")).cast(data_type)
    if isinstance(data_type, DecimalType):
        return F.lit(str(value)).cast(data_type)
    return F.lit(value).cast(data_type)


def _with_weight(schema: StructType) -> StructType:

    return StructType(list(schema.fields) + [StructField(WEIGHT, IntegerType(), False)])


def groupable(data_type: DataType) -> bool:
    """Whether Spark groups (and so consolidates) values of ``data_type``: not maps."""
    if isinstance(data_type, MapType):
        return False
    if isinstance(data_type, ArrayType):
        return groupable(data_type.elementType)
    if isinstance(data_type, StructType):
        return all(groupable(f.dataType) for f in data_type.fields)
    return True


# -- change data feed ------------------------------------------------------------------------------


def register_changes_from_cdf(
    spark: SparkSession,
    capabilities: Capabilities,
    log: DeltaLog,
    v0: int,
    v1: int,
    view_name: str,
) -> str:
    """Create temp view ``view_name`` with the changes of ``(v0, v1]`` read from the table's change
    data feed: inserts and post-images +1, deletes and pre-images -1.

    The feed reports each commit's changes, so a row changed twice shows both steps; the weights
    still sum to the interval's delta. The caller has ruled out schema changes in the interval
    (see :meth:`DeltaLog.interval`); this checks the engine and the table's configuration.
    """

    if not capabilities.change_data_feed:
        raise ChangeDataFeedUnavailable("this engine has no change data feed; read file sets instead")
    if not log.change_data_feed_covers(v0, v1):
        raise ChangeDataFeedUnavailable(
            f"{log.location}: delta.enableChangeDataFeed was not on for all of ({v0}, {v1}]"
        )
    schema = log.schema_at(v1)
    if v0 == v1:
        spark.createDataFrame([], _with_weight(schema)).createOrReplaceTempView(view_name)
        return view_name
    feed = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", v0 + 1)
        .option("endingVersion", v1)
        .load(log.location)
    )
    change_type = F.col("_change_type")
    weight = F.when(change_type.isin(*ADDS), F.lit(1)).otherwise(F.lit(-1))
    feed.where(change_type.isin(*ADDS, *REMOVES)).select(
        *[_col(f.name) for f in schema.fields], weight.cast("int").alias(WEIGHT)
    ).createOrReplaceTempView(view_name)
    return view_name


# -- the differentiation engine's source resolver ---------------------------------------------------


@dataclass(frozen=True)
class SourceReads:
    """Rows and data files of its sources a refresh reads, by the Delta logs' statistics (the
    refresh history's ``source_rows_read`` and ``source_files_read``)."""

    rows: int = 0
    files: int = 0

    def __add__(self, other: "SourceReads") -> "SourceReads":
        return SourceReads(self.rows + other.rows, self.files + other.files)

    def __mul__(self, times: int) -> "SourceReads":
        return SourceReads(self.rows * times, self.files * times)


def version_reads(log: DeltaLog, version: int) -> SourceReads:
    """What a scan of ``log``'s table at ``version`` reads."""
    files = log.files_at(version)
    return SourceReads(sum(f.num_records or 0 for f in files), len(files))


def interval_reads(interval: Interval) -> SourceReads:
    """What reading ``interval``'s changes from its files reads: the added and removed files,
    and of each file whose deletion vector grew, its newly masked rows."""
    rows = _total(f.num_records for f in interval.added + interval.removed) + interval.masked_rows
    return SourceReads(rows, len(interval.added) + len(interval.removed) + len(interval.masked))


def _total(counts: Iterable[Optional[int]]) -> int:
    return sum(c or 0 for c in counts)


@dataclass(frozen=True)
class ViewNames:
    """How the temp views a reader registers are named, and what becomes of them after it.

    :meth:`unique` names are used once and the views dropped at the end; :meth:`kept` names are
    one DT's at every refresh, and its views stay for its next refresh to replace
    (docs/ARCHITECTURE.md, "Reading sources")."""

    prefix: str
    dropped: bool

    @staticmethod
    def unique() -> "ViewNames":
        return ViewNames(uuid.uuid4().hex[:12], dropped=True)

    @staticmethod
    def kept(owner: str) -> "ViewNames":
        return ViewNames(hashlib.sha1(owner.encode()).hexdigest()[:12], dropped=False)

    def release(self, spark: SparkSession, views: Iterable[str]) -> None:
        """The end of a reader's use of ``views``."""
        if self.dropped:
            for view in views:
                spark.catalog.dropTempView(view)


class VersionedRelations:
    """How to read "table at version v" on this engine: ``VERSION AS OF``, or a temp view over the
    snapshot's files (read as change extraction reads them) where the engine's time travel cannot
    read the version (Sail fails on most versions behind a table's latest checkpoint) or reads a
    small plain table slower than its files (``Capabilities.versions_from_files``;
    docs/ARCHITECTURE.md, "Engines"). With ``outlives_session`` (SQL a user's model keeps, such
    as a view's definition, which may not name a temp view) only the versions the engine cannot
    read are views. ``close()`` drops the views, unless they are :class:`ViewNames`' ``kept``.
    """

    def __init__(
        self,
        spark: SparkSession,
        capabilities: Optional[Capabilities] = None,
        outlives_session: bool = False,
        names: Optional[ViewNames] = None,
    ) -> None:
        self.spark = spark
        self.capabilities = capabilities
        self.outlives_session = outlives_session
        self._views: Dict[Tuple[str, int], str] = {}
        self._names = names or ViewNames.unique()
        self._prefix = f"_dyn_version_{self._names.prefix}"

    def view(self, log: Optional[DeltaLog], version: int) -> Optional[str]:
        """A temp view holding ``log``'s table at ``version``; None where ``VERSION AS OF`` works."""
        if log is None or not self._from_files(log, version):
            return None
        key = (log.location, version)
        if key not in self._views:
            snapshot = log.snapshot(version)
            frames = _read_files(self.spark, snapshot, list(snapshot.files.values()), +1, self.capabilities)
            frame = (
                reduce(lambda left, right: left.unionAll(right), frames).drop(WEIGHT)
                if frames
                else self.spark.createDataFrame([], snapshot.schema)
            )
            view = f"{self._prefix}_{len(self._views)}"
            frame.createOrReplaceTempView(view)
            self._views[key] = view
        return self._views[key]

    def _from_files(self, log: DeltaLog, version: int) -> bool:
        capabilities = self.capabilities
        if capabilities is None:
            return False
        if not capabilities.time_travel_behind_checkpoint:
            # The log as it is now, not as the refresh observed it: a writer may have added a
            # checkpoint past the version since (docs/ARCHITECTURE.md, "Engines").
            checkpoint = log.latest_checkpoint(now=True)
            if checkpoint is not None and version < checkpoint:
                return True
        if self.outlives_session or not capabilities.versions_from_files:
            return False
        snapshot = log.snapshot(version)
        return (
            snapshot.rows_are_files_rows
            and len(snapshot.files) <= capabilities.versions_from_files
            # Spark looks up each file named to it, one by one: a request each on an object store.
            and all(f.uri.startswith("file:") for f in snapshot.files.values())
        )

    def relation(self, relation: str, log: DeltaLog, version: int) -> str:
        """SQL text of a relation reading ``relation`` at ``version``."""
        return self.view(log, version) or f"{relation} VERSION AS OF {version}"

    def close(self) -> None:
        views, self._views = self._views, {}
        self._names.release(self.spark, views.values())

    def __enter__(self) -> "VersionedRelations":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class FileSetResolver:
    """Answers the differentiation engine's ``SourceResolver`` questions for Delta sources.

    ``sources`` maps each table name, as the query spells it, to its log and the interval
    ``(v0, v1]`` of this refresh; ``intervals``, keyed the same, holds those already read from the
    log (a refresh reads them to decide), which are not read again. Change views are registered on
    first use only, because many plans never need the changes of some inputs (an unchanged side
    of a join). With
    ``capabilities`` of an engine that has a change data feed, MIXED and REMOVED_ONLY intervals of
    tables with the feed enabled are read from it. ``measured``, keyed the same, holds the
    changes a refresh already brought to this process (a rewritten input's net change,
    docs/ARCHITECTURE.md, "Rewritten inputs"), read from there instead. ``close()`` drops every
    view this created.
    """

    def __init__(
        self,
        spark: SparkSession,
        sources: Mapping[str, Tuple[DeltaLog, int, int]],
        *,
        intervals: Optional[Mapping[str, Interval]] = None,
        capabilities: Optional[Capabilities] = None,
        minimize: bool = True,
        names: Optional[ViewNames] = None,
        measured: Optional[Mapping[str, pa.Table]] = None,
    ) -> None:
        self.spark = spark
        self.capabilities = capabilities
        self.minimize = minimize
        self._sources: Dict[str, Tuple[str, DeltaLog, int, int]] = {}
        self._intervals: Dict[str, Interval] = {}
        self._measured = {table_name(name): rows for name, rows in (measured or {}).items()}
        for name, (log, v0, v1) in sources.items():
            key = table_name(name)
            relation = quoted_table(key)
            self._sources[key] = (relation, log, v0, v1)
            known = (intervals or {}).get(name)
            if known is not None:
                self._intervals[key] = _of_versions(known, v0, v1)
        self._views: Dict[str, str] = {}
        self._costs: Dict[str, SourceReads] = {}
        self._names = names or ViewNames.unique()
        self._prefix = f"_dyn_changes_{self._names.prefix}"
        self._versions = VersionedRelations(spark, capabilities, names=self._names)

    def _source(self, table: str) -> Tuple[str, str, DeltaLog, int, int]:
        key = table_name(table)
        try:
            relation, log, v0, v1 = self._sources[key]
        except KeyError:
            raise KeyError(f"{table} is not a source of this refresh") from None
        return key, relation, log, v0, v1

    def before(self, table: str) -> str:
        _, relation, log, v0, _ = self._source(table)
        return self._handed(self._versions.relation(relation, log, v0), version_reads(log, v0))

    def after(self, table: str) -> str:
        _, relation, log, _, v1 = self._source(table)
        return self._handed(self._versions.relation(relation, log, v1), version_reads(log, v1))

    def _handed(self, text: str, cost: SourceReads) -> str:
        """``text``, a relation this resolver hands to the delta query, remembered with what
        one read of it reads of the source (:meth:`reads`)."""
        self._costs[text] = cost
        return text

    def reads(self, sql: str) -> SourceReads:
        """What ``sql``, built from this resolver's relations, reads of the sources: each
        relation as often as it appears (the changes this process measured read nothing more)."""
        total = SourceReads()
        for text, cost in self._costs.items():
            total += cost * len(re.findall(re.escape(text) + r"(?!\w)", sql))
        return total

    def interval(self, table: str) -> Interval:
        return self._interval(self._source(table)[0])

    def _interval(self, key: str) -> Interval:
        if key not in self._intervals:
            _, log, v0, v1 = self._sources[key]
            self._intervals[key] = log.interval(v0, v1)
        return self._intervals[key]

    def undifferentiable(self) -> Dict[str, str]:
        """Sources whose interval cannot be differentiated, with the reason: the refresh should
        become REINITIALIZE before any change is read."""
        reasons = {}
        for key, (relation, *_) in self._sources.items():
            reason = self._interval(key).undifferentiable_reason
            if reason is not None:
                reasons[relation] = reason
        return reasons

    def is_unchanged(self, table: str) -> bool:
        measured = self._measured.get(table_name(table))
        if measured is not None:
            return bool(measured.num_rows == 0)
        interval = self.interval(table)
        return interval.differentiable and interval.kind is IntervalKind.EMPTY

    def is_insert_only(self, table: str) -> bool:
        measured = self._measured.get(table_name(table))
        if measured is not None:
            return inserts_only(measured)
        interval = self.interval(table)
        return interval.differentiable and interval.kind in (IntervalKind.EMPTY, IntervalKind.ADDED_ONLY)

    def changes(self, table: str) -> str:
        """A temp view name: the table's columns plus ``_dyn_weight``."""
        key, relation, log, v0, v1 = self._source(table)
        if key in self._views:
            return self._views[key]
        interval = self.interval(table)
        if interval.undifferentiable_reason is not None:
            raise UndifferentiableSource(relation, interval.undifferentiable_reason)
        view = f"{self._prefix}_{len(self._views)}"
        measured = self._measured.get(key)
        if measured is not None:
            self.spark.createDataFrame(measured).createOrReplaceTempView(view)
        elif self._use_change_data_feed(log, interval):
            assert self.capabilities is not None
            register_changes_from_cdf(self.spark, self.capabilities, log, v0, v1, view)
        else:
            register_changes(
                self.spark,
                log,
                v0,
                v1,
                view,
                interval=interval,
                minimize=self.minimize,
                capabilities=self.capabilities,
            )
        self._views[key] = view
        return self._handed(view, SourceReads() if measured is not None else interval_reads(interval))

    def _use_change_data_feed(self, log: DeltaLog, interval: Interval) -> bool:
        """The feed pays off where files were rewritten; appends read the same added files."""
        return (
            self.capabilities is not None
            and self.capabilities.change_data_feed
            and interval.kind in (IntervalKind.MIXED, IntervalKind.REMOVED_ONLY)
            and log.change_data_feed_covers(interval.v0, interval.v1)
        )

    def close(self) -> None:
        views, self._views = self._views, {}
        self._names.release(self.spark, views.values())
        self._versions.close()

    def __enter__(self) -> "FileSetResolver":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
