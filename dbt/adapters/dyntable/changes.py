"""Changes of Delta sources as Spark relations, for any Spark engine.

The differentiation engine asks, per source table, for the table before and after the refresh
interval and for its changes: the table's columns plus ``_dyn_weight`` (+1 for a row instance that
appeared, -1 for one that went away). Everywhere, changes come from file sets (docs/ARCHITECTURE.md,
"Reading sources"): rows of the files added over ``(v0, v1]`` count +1, rows of removed files -1,
read with ``spark.read.parquet`` so Sail and JVM Spark behave alike (one scan per Arrow schema the
files declare where the engine's scan merges them; :mod:`.data_files`). Where the engine has a change
data feed and the table kept it on for the whole interval, updates are read from the feed instead,
which avoids re-reading every row of a rewritten file.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass
from functools import reduce
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DataType,
    IntegerType,
    MapType,
    StructField,
    StructType,
)

from dbt.adapters.dyntable.data_files import (
    arrow_rows,
    arrow_schema,
    arrow_with_weight,
    column,
    masked,
    read_files,
    read_rows,
)
from dbt.adapters.dyntable.delta_log import DeltaLog, Interval, IntervalKind, Snapshot
from dbt.adapters.dyntable.delta_log.model import ValueRange
from dbt.adapters.dyntable.differentiation.pruning import Within, restricted
from dbt.adapters.dyntable.engines.base import Capabilities, arrow_frame
from dbt.adapters.dyntable.in_process_changes import cancelled_in_place, minimized_rows
from dbt.adapters.dyntable.vocabulary import (
    RESERVED_COLUMNS,
    WEIGHT,
    WEIGHT_SUM,
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
    engine's (None: any engine's, see :func:`~dbt.adapters.dyntable.data_files.read_files`).
    """
    before, after = _snapshots(log, interval)
    schema = after.schema
    sides: List[DataFrame] = []
    if interval.added:
        sides.extend(read_files(spark, after, interval.added, +1, capabilities))
    if interval.removed:
        sides.extend(read_files(spark, before, interval.removed, -1, capabilities))
    for data_file in interval.masked:
        sides.extend(read_rows(spark, after, data_file, interval.newly_masked[data_file.path], -1))
    if not sides:
        return spark.createDataFrame([], _with_weight(schema))
    changes = reduce(lambda left, right: left.unionAll(right), sides)
    if minimize and interval.kind is IntervalKind.MIXED and all(groupable(f.dataType) for f in schema.fields):
        changes = minimized(changes, [f.name for f in schema.fields])
    return changes


def _snapshots(log: DeltaLog, interval: Interval) -> Tuple[Snapshot, Snapshot]:
    """The snapshots at ``interval``'s ends, checked to have changes to read."""
    if interval.undifferentiable_reason is not None:
        raise UndifferentiableSource(log.location, interval.undifferentiable_reason)
    after = log.snapshot(interval.v1)
    clash = (RESERVED_COLUMNS | {_COPY}).intersection(f.name for f in after.schema.fields)
    if clash:
        raise UndifferentiableSource(log.location, f"column name(s) {sorted(clash)} are reserved")
    return log.snapshot(interval.v0), after


def changes_in_process(log: DeltaLog, interval: Interval) -> pa.Table:
    """:func:`changes_dataframe`'s rows, minimized, read and consolidated in this process with
    Arrow: a rewritten input of a few megabytes costs milliseconds here and seconds as an
    engine job (docs/ARCHITECTURE.md, "Rewritten inputs"). Its columns are in the Arrow types
    Spark gives the snapshot's (``arrow_frame`` with :func:`change_schema` reads them back as
    the engine path's). Raises ``data_files.NotReadableInProcess`` for columns Arrow cannot group
    (structs, arrays, maps) or would read otherwise than the engine."""
    before, after = _snapshots(log, interval)
    schema = arrow_schema(after.schema)
    empty = arrow_with_weight(schema).empty_table()
    added = [arrow_rows(after, f, masked(after, f), +1, schema) for f in interval.added]
    removed = [arrow_rows(before, f, masked(before, f), -1, schema) for f in interval.removed]
    sides = [
        *cancelled_in_place(pa.concat_tables([empty, *added]), pa.concat_tables([empty, *removed])),
        *(
            arrow_rows(after, f, interval.newly_masked[f.path], -1, schema, keep=True)
            for f in interval.masked
        ),
    ]
    return minimized_rows(pa.concat_tables(sides))


def change_schema(log: DeltaLog, interval: Interval) -> StructType:
    """The columns of ``interval``'s changes: the table's at its end, and the weight."""
    return _with_weight(log.snapshot(interval.v1).schema)


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

    keys = [column(c) for c in columns]
    summed = (
        changes.groupBy(*keys).agg(F.sum(column(WEIGHT)).alias(WEIGHT_SUM)).where(column(WEIGHT_SUM) != 0)
    )
    expanded = summed.select(
        *keys,
        F.when(column(WEIGHT_SUM) > 0, F.lit(1)).otherwise(F.lit(-1)).cast("int").alias(WEIGHT),
        F.explode(F.sequence(F.lit(1), F.abs(column(WEIGHT_SUM)).cast("int"))).alias(_COPY),
    )
    return expanded.select(*keys, column(WEIGHT))


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
        *[column(f.name) for f in schema.fields], weight.cast("int").alias(WEIGHT)
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


def version_reads(log: DeltaLog, version: int, bound: Optional[Within] = None) -> SourceReads:
    """What a scan of ``log``'s table at ``version`` reads: its files, or those that may hold
    rows within ``bound``."""
    files = log.files_at(version) if bound is None else bound.read(log.files_at(version))
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
        self._views: Dict[Tuple[str, int, Optional[Within]], str] = {}
        self._names = names or ViewNames.unique()
        self._prefix = f"_dyn_version_{self._names.prefix}"

    def view(self, log: Optional[DeltaLog], version: int, bound: Optional[Within] = None) -> Optional[str]:
        """A temp view holding ``log``'s table at ``version`` (with ``bound``, its files that may
        hold rows within it); None where ``VERSION AS OF`` works."""
        if log is None or not self._from_files(log, version):
            return None
        return self._view(log, version, bound)

    def latest(self, relation: str, log: DeltaLog) -> str:
        """``relation``'s table as it is now, for a refresh holding its lock (a DT's stored rows):
        from its files where the engine reads a small table faster so, else by its name. The
        latest version is never behind a checkpoint, so the log is not listed again for one."""
        version = log.latest_version()
        return self._view(log, version) if self._faster_from_files(log, version) else relation

    def _view(self, log: DeltaLog, version: int, bound: Optional[Within] = None) -> str:
        key = (log.location, version, bound)
        if key not in self._views:
            snapshot = log.snapshot(version)
            files = list(snapshot.files.values()) if bound is None else bound.read(snapshot.files.values())
            frames = read_files(self.spark, snapshot, files, +1, self.capabilities)
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
        return self._faster_from_files(log, version)

    def _faster_from_files(self, log: DeltaLog, version: int) -> bool:
        """Whether the engine reads ``log``'s table at ``version`` faster from its files
        (``Capabilities.versions_from_files``)."""
        capabilities = self.capabilities
        if capabilities is None or self.outlives_session or not capabilities.versions_from_files:
            return False
        snapshot = log.snapshot(version)
        return (
            len(snapshot.files) <= capabilities.versions_from_files
            # Spark looks up each file named to it, one by one: a request each on an object store.
            and all(f.uri.startswith("file:") for f in snapshot.files.values())
            and snapshot.rows_are_files_rows  # last: where vectors are on, it reads them
        )

    def relation(self, relation: str, log: DeltaLog, version: int, bound: Optional[Within] = None) -> str:
        """SQL text of a relation reading ``relation`` at ``version``; with ``bound``, its rows
        within it, read from the files that may hold them where the version is read from files."""
        return restricted(self.view(log, version, bound) or f"{relation} VERSION AS OF {version}", bound)

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

    def before(self, table: str, bound: Optional[Within] = None) -> str:
        _, relation, log, v0, _ = self._source(table)
        return self._version(relation, log, v0, bound)

    def after(self, table: str, bound: Optional[Within] = None) -> str:
        _, relation, log, _, v1 = self._source(table)
        return self._version(relation, log, v1, bound)

    def _version(self, relation: str, log: DeltaLog, version: int, bound: Optional[Within]) -> str:
        """``relation`` at ``version``, or its rows within ``bound`` where it leaves out files:
        what a read skipping those by their statistics reads."""
        pruning = None if bound is None else bound.pruning(log.files_at(version))
        read = self._versions.relation(relation, log, version, pruning)
        return self._handed(read, version_reads(log, version, pruning))

    def stored(self, relation: str, log: DeltaLog) -> str:
        """The DT ``relation`` names, as its delta query reads what it holds
        (:meth:`VersionedRelations.latest`: delta-spark would load its new snapshot first)."""
        return self._versions.latest(relation, log)

    def value_range(self, table: str, column: str) -> Optional[ValueRange]:
        return self.interval(table).value_range(column)

    def size_bytes(self, table: str) -> Optional[int]:
        _, _, log, _, v1 = self._source(table)
        return log.size_bytes(v1)

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
            arrow_frame(self.spark, measured, change_schema(log, interval)).createOrReplaceTempView(view)
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
