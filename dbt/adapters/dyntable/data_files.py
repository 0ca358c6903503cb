"""A Delta snapshot's data files read into Spark frames alike on every engine (docs/ARCHITECTURE.md,
"Reading sources"): with ``spark.read.parquet``, one scan per partition and, where the engine's
scan merges them, per Arrow schema the files declare; the rows a deletion vector masks or names
through Arrow, as only a read of the file in order finds a row by position. Change extraction
(:mod:`.changes`) reads an interval's files with a weight; versions read from files
(:class:`~dbt.adapters.dyntable.changes.VersionedRelations`) read a snapshot's."""

from __future__ import annotations

import functools
import urllib.parse
from datetime import datetime
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.errors import PySparkTypeError
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import DataType, DecimalType, StructType, TimestampNTZType, TimestampType

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.delta_log import DataFile, Snapshot
from dbt.adapters.dyntable.engines.base import Capabilities
from dbt.adapters.dyntable.vocabulary import WEIGHT, quote

#: The most bytes of a table's files this process reads to spare the engine a job: rewritten files
#: compared (``refresh/net_change.py``), a DT's files counted against a delta (``refresh/held_rows.py``).
#: One row updated in a one-file source of 1M rows (25 MB, both versions) was compared here in 0.3 to
#: 0.6 s, at about 300 MB of memory at its peak; by delta-spark's engine job in about 8 s.
IN_PROCESS_MAX_BYTES = 32 << 20


def column(name: str) -> Column:
    """The column ``name``, quoted: a source's column may be named anything."""
    return F.col(quote(name))


def read_files(
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
        masked_rows = snapshot.deleted_rows.get(data_file.path)
        if masked_rows is not None:
            frames.extend(read_rows(spark, snapshot, data_file, masked_rows, weight, keep=False))
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
        else column(f.name).cast(f.dataType).alias(f.name)
        if f.name in frame.columns
        else F.lit(None).cast(f.dataType).alias(f.name)
        for f in snapshot.schema.fields
    ]
    return frame.select(*columns, F.lit(weight).cast("int").alias(WEIGHT))


def masked(snapshot: Snapshot, data_file: DataFile) -> "np.ndarray[Any, Any]":
    """The positions of the file's rows the snapshot's deletion vector masks (none without one)."""
    return snapshot.deleted_rows.get(data_file.path, np.empty(0, np.int64))


def read_rows(
    spark: SparkSession,
    snapshot: Snapshot,
    data_file: DataFile,
    positions: "np.ndarray[Any, Any]",
    weight: int,
    keep: bool = True,
) -> List[DataFrame]:
    """The rows at ``positions`` of one data file (or, with ``keep`` off, all its other rows):
    a deletion vector names rows by position, which only a read of the file in order can
    match, so the file is read here, through Arrow (no frame when no row is left)."""
    rows = file_rows(snapshot, data_file, positions, keep)
    if rows.num_rows == 0:
        return []
    frame = spark.createDataFrame(rows)
    return [_with_partitions(frame, snapshot, dict(data_file.partition_values), weight)]


def file_rows(
    snapshot: Snapshot, data_file: DataFile, positions: "np.ndarray[Any, Any]", keep: bool
) -> pa.Table:
    """The rows at ``positions`` of one data file (with ``keep`` off: all its other rows), read
    in this process: the snapshot's columns the file holds (a file written before a column was
    added lacks it), in plain Arrow types. A column is found by name as Spark's Parquet reader
    finds it, ignoring case where no name matches exactly."""
    filesystem, path = storage.arrow(data_file.uri)
    with filesystem.open_input_file(path) as source:
        parquet = pq.ParquetFile(source)
        held = _held_columns(parquet.schema_arrow.names, _file_schema(snapshot).names)
        if keep:
            rows = _rows_at(parquet, list(held.values()), positions)
        else:
            rows = _plain_types(parquet.read(columns=list(held.values())))
            dropped = positions[positions < rows.num_rows]
            if dropped.size:  # a filter copies every row: none where no row is dropped
                kept = np.ones(rows.num_rows, dtype=bool)
                kept[dropped] = False
                rows = rows.filter(pa.array(kept))
        rows = _int96_in_utc(parquet, rows)
    return rows.rename_columns(list(held))


def _int96_in_utc(parquet: pq.ParquetFile, rows: pa.Table) -> pa.Table:
    """``rows`` with each INT96 timestamp (Spark's default for TIMESTAMP columns) as the UTC instant
    Spark wrote and reads it as: Arrow reads it without a zone. A file whose writer rebased INT96
    values to the old Julian calendar (Spark's legacy mode, for dates before 1900) is left as
    read, for :func:`_cast` to refuse."""
    metadata = parquet.metadata.metadata or {}
    if b"org.apache.spark.legacyINT96" in metadata:
        return rows
    schema = parquet.schema
    int96 = {schema.column(i).path for i in range(len(schema)) if schema.column(i).physical_type == "INT96"}
    for i, name in enumerate(rows.column_names):
        values = rows.column(i)
        if name in int96 and pa.types.is_timestamp(values.type) and values.type.tz is None:
            rows = rows.set_column(i, name, values.cast(pa.timestamp(values.type.unit, "UTC")))
    return rows


def _held_columns(in_file: Sequence[str], wanted: Sequence[str]) -> Dict[str, str]:
    """Each wanted column the file holds, with its name in the file."""
    by_lower: Dict[str, List[str]] = {}
    for name in in_file:
        by_lower.setdefault(name.lower(), []).append(name)
    held = {}
    for name in wanted:
        candidates = by_lower.get(name.lower(), [])
        if name in candidates or len(candidates) == 1:
            held[name] = name if name in candidates else candidates[0]
    return held


class NotReadableInProcess(ValueError):
    """A file's values Arrow would not read as the engine does: the engine reads them instead."""


def arrow_schema(schema: StructType) -> pa.Schema:
    """``schema`` in the Arrow types Spark gives it, for rows read in this process. Raises
    :class:`NotReadableInProcess` for a nested column (Arrow groups no struct, array or map)."""
    try:
        arrow = to_arrow_schema(schema)
    except (TypeError, PySparkTypeError) as exc:  # a type Spark has no Arrow form for
        raise NotReadableInProcess(str(exc)) from exc
    nested = [f.name for f in arrow if pa.types.is_nested(f.type)]
    if nested:
        raise NotReadableInProcess(f"nested column(s) {nested}")
    return arrow


def arrow_rows(
    snapshot: Snapshot,
    data_file: DataFile,
    positions: "np.ndarray[Any, Any]",
    weight: int,
    schema: pa.Schema,
    keep: bool = False,
) -> pa.Table:
    """:func:`file_rows` in ``schema`` (the snapshot's columns in the Arrow types Spark gives
    them), the partition columns from the log and the weight added: what :func:`read_files`
    reads of the file, without an engine. Raises :class:`NotReadableInProcess` where Arrow
    would read a value differently from the engine's cast."""
    rows = file_rows(snapshot, data_file, positions, keep)
    partitions = data_file.partition_values
    columns = []
    for field in schema:
        if field.name in snapshot.partition_columns:
            columns.append(pa.array([partitions.get(field.name)] * rows.num_rows, field.type))
        elif field.name in rows.column_names:
            columns.append(_cast(rows.column(field.name), field))
        else:
            columns.append(pa.nulls(rows.num_rows, field.type))
    columns.append(pa.array(np.full(rows.num_rows, weight, np.int32)))
    return pa.Table.from_arrays(columns, schema=arrow_with_weight(schema))


def live_rows(snapshot: Snapshot, schema: pa.Schema) -> pa.Table:
    """The snapshot's live rows (its deletion vectors applied) in ``schema``'s columns, read in
    this process with :func:`arrow_rows`, which raises :class:`NotReadableInProcess` where Arrow
    would read a value otherwise than the engine."""
    files = [arrow_rows(snapshot, f, masked(snapshot, f), 1, schema) for f in snapshot.files.values()]
    # The weight dropped after the concatenation: a table of no columns keeps its rows only then.
    return pa.concat_tables(files).drop_columns([WEIGHT]) if files else schema.empty_table()


def arrow_with_weight(schema: pa.Schema) -> pa.Schema:
    """The Arrow columns of changes: ``schema``'s and the weight."""
    return schema.append(pa.field(WEIGHT, pa.int32(), False))


def _cast(values: pa.ChunkedArray, field: pa.Field) -> pa.ChunkedArray:
    """``values`` as ``field``'s type, where Arrow's cast means what Spark's does: a widening, or
    a timestamp moved between zones. A timestamp without a zone against one with (local time,
    which Spark reads through the session's zone; INT96 comes here in UTC: :func:`_int96_in_utc`),
    and any cast Arrow refuses or would lose digits in, are the engine's to read."""
    source = values.type
    if pa.types.is_timestamp(source) and pa.types.is_timestamp(field.type):
        if (source.tz is None) != (field.type.tz is None):
            raise NotReadableInProcess(f"{field.name}: timestamp {source} read as {field.type}")
    try:
        return values.cast(field.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise NotReadableInProcess(f"{field.name}: {exc}") from exc


#: Rows a batch when a row group is streamed for the rows at some positions: small enough that a
#: read stops soon after the last of them, large enough to decode pages in few calls.
POSITIONED_BATCH_ROWS = 65_536


def _rows_at(parquet: pq.ParquetFile, columns: Sequence[str], positions: "np.ndarray[Any, Any]") -> pa.Table:
    """The rows at ``positions`` of a Parquet file, in that order and in plain Arrow types,
    reading only the row groups that hold them, each streamed up to its last wanted row: one row
    updated in a file of millions decodes part of one row group, not the file."""
    sizes = [parquet.metadata.row_group(g).num_rows for g in range(parquet.num_row_groups)]
    starts = np.cumsum([0, *sizes])
    order = np.argsort(positions, kind="stable")
    ascending = positions[order]
    group = np.searchsorted(starts, ascending, side="right") - 1
    pieces = []
    for g in np.unique(group):
        wanted = ascending[group == g] - starts[g]
        read = 0
        for batch in parquet.iter_batches(POSITIONED_BATCH_ROWS, row_groups=[int(g)], columns=list(columns)):
            here = wanted[(wanted >= read) & (wanted < read + batch.num_rows)]
            if here.size:  # `take` has no kernel for view types: plain ones first
                rows = _plain_types(pa.Table.from_batches([batch]))
                pieces.append(rows.take(pa.array(here - read, pa.int64())))
            read += batch.num_rows
            if read > wanted[-1]:
                break
    if not pieces:
        return _plain_types(parquet.schema_arrow.empty_table().select(list(columns)))
    # Back from ascending positions to the caller's order.
    return pa.concat_tables(pieces).take(pa.array(np.argsort(order, kind="stable"), pa.int64()))


def _plain_types(rows: pa.Table) -> pa.Table:
    """``rows`` in :func:`_plain` types (``take`` and PySpark's conversion need them)."""
    return rows.cast(pa.schema([f.with_type(_plain(f.type)) for f in rows.schema]))


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
