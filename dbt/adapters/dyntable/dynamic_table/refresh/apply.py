"""Applying a refresh to the DT: one Delta commit, after the production validations.

A delta arrives in Z-set form: the DT's columns plus ``_dyn_weight`` (+n inserts n copies of the
row, -n deletes n copies), one row per distinct tuple. The DT itself holds plain rows with no
hidden columns, so ``SELECT * FROM dt`` is the query's result as a multiset. A MERGE cannot delete
"k of n identical rows", so for every tuple the delta touches the merge deletes all its copies and
inserts back ``old + weight`` of them; ``old`` is read from the DT for the touched tuples only.
An insert-only delta, the common case for appends through filters and joins, is a plain INSERT
that never reads the DT.

With a row key (group keys, distinct rows, a top-1 partition, or a key the project declares), the
DT holds at most one row per key and the merge matches on the key alone: a deleted row is the row
stored under its key, even when its non-key values (a sum of doubles, say) were recomputed with
different rounding. A key the plan proves is applied by one MERGE whose source the engine
computes and checks itself (:meth:`DeltaApplier.merge_on_key`); inserts under stored groups of
count, sum, min and max by one MERGE folding their partials into the groups
(:meth:`DeltaApplier.accumulate`). Where the engine allows it (the embedded one), rows this process
holds are merged or appended by deltalake here rather than handed back to the engine
(:meth:`DeltaApplier._in_process`).

Before the MERGE (docs/ARCHITECTURE.md, "Applying"): the delta must be consolidated (no tuple twice)
and must never delete more copies of a tuple (a keyed row) than the DT holds; with a key, no key may
hold two rows, before or after. A violation of a key the plan proves, or of the rest, fails the
refresh and leaves the DT untouched. A declared key is a promise the data may break (a failing
unique test): then the rows are matched whole, which is right for any multiset, and the refresh says
so in a warning.
"""

from __future__ import annotations

import functools
import json
import posixpath
import time
import urllib.parse
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import sqlglot
from deltalake import CommitProperties, DeltaTable, write_deltalake
from deltalake.transaction import AddAction, RemoveAction
from pyspark.sql.types import ArrayType, MapType, NullType, StructType
from sqlglot import exp

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.changes import groupable
from dbt.adapters.dyntable.delta_log import (
    CHECKPOINT_INTERVAL,
    DEFAULT_CHECKPOINT_INTERVAL,
    DELETION_VECTOR_FEATURES,
    DELETION_VECTORS,
    DataFile,
    DeltaLog,
    Snapshot,
    commit_file,
)
from dbt.adapters.dyntable.differentiation import DeltaQuery
from dbt.adapters.dyntable.differentiation.aggregate import Accumulation
from dbt.adapters.dyntable.dynamic_table.lifecycle import Action
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable, RefreshError
from dbt.adapters.dyntable.dynamic_table.table_features import TableFeatures
from dbt.adapters.dyntable.engines.base import Engine
from dbt.adapters.dyntable.vocabulary import DIALECT, WEIGHT, null_safe_match, quote, sql_string

OLD = "_dyn_old"
#: Per row of a rebuild's difference: the copies of it the query computes (``difference``).
NEW = "_dyn_new"
KIND = "_dyn_kind"
#: Per row key, computed by the engine (Arrow cannot group by arrays or structs): the most rows
#: the DT holds under the key, the delta's summed weight for it, and the row's rank within it
#: (deletes first), so one row stands for its key.
KEY_OLD, KEY_WEIGHT, KEY_RANK = "_dyn_key_old", "_dyn_key_weight", "_dyn_key_rank"
#: Rows of the delta holding the same tuple (1 when consolidated), and a marker of a DT row.
COPIES, PRESENT = "_dyn_copies", "_dyn_present"
#: A DT whose files weigh less than this is written whole by an accumulation of inserts where
#: the engine refolds small tables (``Capabilities.refolds_small_tables``): deltalake's MERGE
#: rewrites the files holding the groups it touches, which for a table this small is every one.
REFOLDED_BYTES = 1 << 20


#: The prefix of the errors the engine raises (``raise_error``) when a delta checked inside a
#: statement fails a validation; the code after it names which (``ENGINE_CHECKS``).
ENGINE_CHECK = "dyntable delta check"
ENGINE_CHECKS = {
    "weight-0": "the delta has rows of weight 0",
    "key-twice": "a key of ({key}) would hold two rows",
    "not-held": "the delta deletes rows the table does not hold",
    "not-positive": "an appended row has a weight below 1",
}


def _fail(code: str, as_type: Optional[str] = None) -> str:
    """SQL that fails the statement with the engine check ``code``; ``as_type`` where it stands
    for a column's value (Sail types a MERGE's every clause, taken or not)."""
    failing = f"raise_error({sql_string(f'{ENGINE_CHECK} {code}')})"
    return f"CAST({failing} AS {as_type})" if as_type else failing


#: A DT at least this large, with deletion vectors, has the engine delete its rows (marking them
#: in deletion vectors) rather than deltalake rewrite the files holding them: its readers then
#: read the rows a refresh changed, not those files (docs/ARCHITECTURE.md, "Rewritten inputs").
MASKED_BYTES = 32 << 20


def _writable_in_process(snapshot: Snapshot) -> bool:
    """The DT uses nothing deltalake's writer might not keep (table features, whether listed or
    implied by a writer version 3-6: CHECK constraints, a change data feed, generated or identity
    columns, column mapping; deletion vectors it keeps: it writes none, but reads through the
    ones a table holds and rewrites their files whole) and only atomic columns (DataFusion
    compares nested values otherwise than Spark's ``<=>``), so this process may write it
    (``Capabilities.merge_in_process``)."""
    return (
        set(snapshot.writer_features) <= DELETION_VECTOR_FEATURES
        and snapshot.min_writer_version in (1, 2, 7)
        and snapshot.column_mapping_mode == "none"
        and not any(k.startswith("delta.constraints.") for k in snapshot.configuration)
        and not any(isinstance(f.dataType, (ArrayType, MapType, StructType)) for f in snapshot.schema.fields)
    )


@functools.lru_cache(maxsize=1024)
def datafusion_sql(spark_sql: str) -> str:
    """A Spark SQL expression as deltalake's MERGE reads it (DataFusion: double-quoted names,
    ``IS NOT DISTINCT FROM``). Each conjunct is parenthesized: DataFusion binds ``AND`` tighter
    than ``IS NOT DISTINCT FROM``."""
    parsed = sqlglot.parse_one(spark_sql, read=DIALECT)
    if not isinstance(parsed, exp.And):
        return parsed.sql(dialect="postgres")
    return " AND ".join(f"({c.sql(dialect='postgres')})" for c in parsed.flatten())


#: The folder, inside the DT's and skipped by readers and VACUUM as every ``_`` folder is, where
#: deltalake writes the files a compaction merges (``merge_files``).
COMPACTION_FOLDER = "_dyntable_compaction_"
#: The table settings that shape the files a writer writes: the columns their statistics cover,
#: and their target size.
FILE_SETTINGS = ("delta.dataSkippingNumIndexedCols", "delta.dataSkippingStatsColumns", "delta.targetFileSize")
#: Delta Spark's OPTIMIZE merges the files smaller than this session setting.
OPTIMIZE_MIN_FILE_SIZE = "spark.databricks.delta.optimize.minFileSize"
#: How a user recovers a DT whose delta failed validation.
FULL_REFRESH_FIX = "Run `dbt run --full-refresh -s <model>` to rebuild it."


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


def in_engine(
    dt: DynamicTable,
    guarded: bool,
    delta: DeltaQuery,
    key: Optional[Sequence[str]],
    declared_by: Optional[str],
) -> Optional[InEngine]:
    """How ``dt``'s delta is applied by the engine alone; None when it comes to this process: the
    change fuse counts its rows first (``guarded``), ``immutable_where`` filters them, or it
    deletes rows matched whole or on a declared key."""
    if guarded or dt.config.immutable_where is not None:
        return None
    if DeltaApplier.appends(delta.insert_only, key, declared_by):
        return InEngine.APPEND
    if key is None or declared_by is not None:
        return None
    accumulation = delta.accumulation
    if accumulation is not None and sorted(c.lower() for c in accumulation.keys) == sorted(
        c.lower() for c in key
    ):
        return InEngine.ACCUMULATE
    return InEngine.MERGE


class DeltaValidationError(RuntimeError):
    """A delta failed a production validation; the DT was not touched. ``detail`` says which."""

    action = Action.INCREMENTAL
    reason = "delta validation failed"

    def __init__(self, detail: str, fix: str = FULL_REFRESH_FIX) -> None:
        super().__init__(f"the refresh stopped before touching the table: {detail}. {fix}")
        self.detail = detail


@dataclass
class PreparedDelta:
    columns: List[str]
    rows: pa.Table  # columns + weight + old multiplicity (of the tuple, or of the key) in the DT
    key: Optional[List[str]] = None  # the row key the DT is matched on; None: the whole row
    warning: Optional[str] = None  # a declared key the data breaks, so whole rows were matched

    @property
    def is_empty(self) -> bool:
        return bool(self.rows.num_rows == 0)

    @property
    def inserted(self) -> int:
        weights = self.rows.column(WEIGHT)
        return int(pc.sum(pc.if_else(pc.greater(weights, 0), weights, 0)).as_py() or 0)

    @property
    def deleted(self) -> int:
        weights = self.rows.column(WEIGHT)
        return int(-(pc.sum(pc.if_else(pc.less(weights, 0), weights, 0)).as_py() or 0))


#: How a refresh has the DT commit it is about to make record its intent as the commit's
#: ``userMetadata``: True if it will.
Carry = Callable[[str], bool]


class DeltaApplier:
    def __init__(self, engine: "Engine", dt: "DynamicTable", dt_log: Optional[DeltaLog] = None) -> None:
        """``dt_log``: the DT's log where the caller has it open already."""
        self.engine = engine
        self.dt = dt
        self._dt_log = dt_log
        #: What the next commit on the DT records as its ``commitInfo.userMetadata`` (:meth:`carry`,
        #: :meth:`carry_in_append`).
        self._user_metadata: Optional[str] = None

    def _log(self) -> Optional[DeltaLog]:
        """The DT's Delta log, one instance for this refresh (its snapshots cached); None until
        the DT exists."""
        if self._dt_log is None:
            self._dt_log = self.engine.delta_log(self.dt.name)
        return self._dt_log

    # -- FULL / REINITIALIZE ---------------------------------------------------------------------

    def check_output(self, query: str) -> None:
        """Refuse, before anything is written, a query whose output no Delta table can hold or
        that does not have the columns the model's ``unique_key``, ``partition_by`` or
        ``cluster_by`` names (the engine's own words would name no config key)."""
        fields = self.engine.schema_of(query).fields
        for field in fields:
            if isinstance(field.dataType, NullType):
                raise RefreshError(
                    f"column {field.name} has no type (a bare NULL), which a Delta "
                    f"table cannot store. Cast it, e.g. cast(null as string) as {field.name}."
                )
        names = {f.name.lower() for f in fields}
        config = self.dt.config
        for key, listed in (
            ("unique_key", config.unique_key),
            ("partition_by", config.partition_by),
            ("cluster_by", config.cluster_by),
        ):
            missing = [c for c in listed if c.lower() not in names]
            if missing:
                raise RefreshError(
                    f"{key} {', '.join(missing)} is not a column of its query "
                    f"(its columns: {', '.join(f.name for f in fields)}). Fix {key} or the query."
                )

    def create_empty(self, query: str) -> List[str]:
        """Create the DT empty, with the query's columns nullable (as Spark's CTAS keeps them),
        its partitioning or clustering and its comments (docs/ARCHITECTURE.md, "Table features");
        returns the warnings about what its engine cannot do."""
        features = TableFeatures(self.engine, self.dt)
        fields = self.engine.schema_of(query).fields
        columns = ", ".join(
            f"{quote(f.name)} {f.dataType.simpleString()}{features.column_comment(f.name)}" for f in fields
        )
        clauses, warnings = features.create_clauses()
        warnings = self._clear_place() + warnings
        self.engine.execute(f"CREATE TABLE {self.dt.relation} ({columns}) USING delta{clauses}")
        return warnings

    def _clear_place(self) -> List[str]:
        """Drop what stands where the DT goes and is no Delta table (a view, a parquet table: a
        model whose materialization changed), as dbt's own materializations drop a relation of
        another type before creating theirs; returns the warning saying so."""
        entry = self.engine.catalog_entry(self.dt.schema, self.dt.identifier)
        if not entry:
            return []
        kind = "view" if entry.get("Type", "").upper() == "VIEW" else "table that is not a Delta table"
        self.engine.execute(f"DROP {'VIEW' if kind == 'view' else 'TABLE'} {self.dt.relation}")
        return [
            f"Model '{self.dt.model or self.dt.name}': {self.dt.name} was a {kind}; it was dropped and "
            "replaced by the dynamic table."
        ]

    def overwrite(self, query: str) -> Tuple[int, int]:
        """Replace the DT's rows with the query's in one commit, its schema and partitioning too
        where they changed (docs/ARCHITECTURE.md, "Applying"); returns (inserted, deleted)."""
        before = self.row_count()
        if self.keeps_layout(query):
            self.engine.execute(f"INSERT OVERWRITE {self.dt.relation} SELECT * FROM ({query}) AS q")
        else:
            self.engine.replace_table(self.dt.schema, self.dt.identifier, query, self.dt.config.partition_by)
        return self.row_count(), before

    def keeps_layout(self, query: str) -> bool:
        """Whether the DT holds ``query``'s columns, types and the model's partitioning already."""
        wanted = [(f.name.lower(), f.dataType) for f in self.engine.schema_of(query).fields]
        current = [(f.name.lower(), f.dataType) for f in self._schema().fields]
        return wanted == current and self._partitioning() == list(self.dt.config.partition_by)

    def difference(self, query: str, limit: int) -> Optional[PreparedDelta]:
        """What the DT must change to hold ``query``'s rows, staged as a delta matched on whole
        rows (docs/ARCHITECTURE.md, "Rewritten inputs"): the query's rows and the DT's, counted
        per distinct row, and each row whose counts differ, with its weight and the copies the
        DT holds. One engine job, which reads the DT once. None where more than ``limit`` rows
        differ (rewriting the DT costs as little then) or a column cannot be grouped (a map)."""
        fields = self._schema().fields
        if not all(groupable(f.dataType) for f in fields):
            return None
        columns = [f.name for f in fields]
        names = ", ".join(quote(c) for c in columns)
        new, held = quote(NEW), quote(PRESENT)
        rows = self.engine.arrow(
            f"SELECT {names}, CAST(sum({new}) - sum({held}) AS BIGINT) AS {quote(WEIGHT)}, "
            f"CAST(1 AS BIGINT) AS {COPIES}, CAST(sum({held}) AS BIGINT) AS {OLD} FROM ("
            f"SELECT {self._typed(columns)}, 1 AS {new}, 0 AS {held} FROM ({query}) AS q UNION ALL "
            f"SELECT {names}, 0, 1 FROM {self.dt.relation}) AS u "
            f"GROUP BY {names} HAVING sum({new}) <> sum({held}) LIMIT {limit + 1}"
        )
        return PreparedDelta(columns, rows) if rows.num_rows <= limit else None

    def _partitioning(self) -> List[str]:
        log = self._log()
        return list(log.partition_columns) if log is not None else []

    def _schema(self) -> "StructType":
        """The DT's columns, from its Delta log (no engine call)."""
        log = self._log()
        if log is None:
            return self.engine.schema_of(f"SELECT * FROM {self.dt.relation}")
        return log.schema_at(log.latest_version())

    def _types(self) -> Dict[str, str]:
        """The DT's column types in SQL, by lower-case column name."""
        return {f.name.lower(): f.dataType.simpleString() for f in self._schema().fields}

    def _spelled(self, columns: Sequence[str]) -> List[str]:
        """``columns`` as the DT spells them: deltalake matches names exactly, Spark either way."""
        named = {f.name.lower(): f.name for f in self._schema().fields}
        return [named.get(c.lower(), c) for c in columns]

    def _typed(self, columns: List[str]) -> str:
        """``columns`` cast to the DT's types: a rule's arithmetic (a folded sum, a widened union)
        may produce a wider type than the query's, which the MERGE would refuse."""
        types = self._types()
        return ", ".join(
            f"CAST({quote(c)} AS {types[c.lower()]}) AS {quote(c)}" if c.lower() in types else quote(c)
            for c in columns
        )

    def row_count(self) -> int:
        """The DT's rows: from its log's statistics where every file has them (no scan, and a
        rebuild of a table whose data files are damaged does not need to read them)."""
        log = self._log()
        counted = log.row_count(log.latest_version()) if log is not None else None
        return counted if counted is not None else self.rows_of(self.dt.relation)

    def rows_of(self, relation: str) -> int:
        """How many rows ``relation`` (a table, or a query in parentheses) holds: one engine job."""
        return int(self.engine.execute(f"SELECT count(*) AS n FROM {relation} AS r").collect()[0]["n"])

    # -- INCREMENTAL -----------------------------------------------------------------------------

    def prepare(
        self,
        delta_sql: str,
        columns: List[str],
        key: Optional[Sequence[str]] = None,
        declared_by: Optional[str] = None,
        insert_only: bool = False,
    ) -> PreparedDelta:
        """Run the delta query once, with what the DT holds of each row, and validate it: one
        engine job. An ``insert_only`` delta matched on whole rows or on a declared key (appends
        through filters and joins) is applied without reading the DT. With a row ``key``, the
        DT's rows are matched on the key instead of the whole row; ``declared_by`` says who
        declared it when the plan does not prove it."""
        key = list(key) if key is not None else None
        reads_dt = not self.appends(insert_only, key, declared_by)
        rows = self._staged(delta_sql, columns, key if reads_dt else None, reads_dt)
        if rows.num_rows == 0:
            return PreparedDelta(columns, rows, key)
        self._check_consolidated(rows)
        if not reads_dt:
            # The plan proves every weight positive, as :meth:`append`'s SQL checks it.
            if pc.min(rows.column(WEIGHT)).as_py() < 1:
                raise DeltaValidationError(ENGINE_CHECKS["not-positive"])
            return PreparedDelta(columns, rows)
        warning = None
        if key is not None:
            broken = self._keys_holding_two_rows(rows)
            if not broken:
                return self._validated(PreparedDelta(columns, rows, key))
            if declared_by is None:
                raise DeltaValidationError(f"{broken} key(s) of ({', '.join(key)}) would hold two rows")
            warning = (
                f"Dynamic table {self.dt.name}: its key ({', '.join(key)}), declared by "
                f"{declared_by}, is not unique in the data ({broken} key(s) hold two rows), so "
                "this refresh matched whole rows instead. Fix the data or the declaration."
            )
            rows = self._staged(delta_sql, columns, None, True)
        return self._validated(PreparedDelta(columns, rows, warning=warning))

    @staticmethod
    def appends(insert_only: bool, key: Optional[Sequence[str]], declared_by: Optional[str]) -> bool:
        """Whether a delta is applied by appending it, never reading the DT: it only inserts, and
        the DT is matched on whole rows or on a declared key (appends through filters and joins)."""
        return insert_only and (key is None or declared_by is not None)

    def append(self, delta_sql: str, columns: List[str]) -> Tuple[int, int]:
        """Append an insert-only delta in the engine: one INSERT ... SELECT, so its rows never
        come to this process (docs/ARCHITECTURE.md, "Applying"). A row of weight n goes in n
        times. The rows inserted come from the commit's metrics, as :meth:`_counted` reads them."""
        names = ", ".join(quote(c) for c in columns)
        # The plan proves every weight positive; sequence(1, 0) would still yield two rows.
        weight = f"d.{quote(WEIGHT)}"
        copies = f"CASE WHEN {weight} > 0 THEN CAST({weight} AS INT) ELSE {_fail('not-positive')} END"
        typed = f"SELECT {self._typed(columns)}, {quote(WEIGHT)} FROM ({delta_sql}) AS q"
        rows = f"SELECT {names} FROM ({typed}) AS d LATERAL VIEW explode(sequence(1, {copies})) AS {COPIES}"

        def insert() -> None:
            with self._engine_checks([]):
                self.engine.append(self.dt.relation, rows, self._user_metadata)

        return self._counted(insert)

    def merge_on_key(self, delta_sql: str, columns: List[str], key: Sequence[str]) -> Tuple[int, int]:
        """Apply a delta matched on a key the plan proves in one MERGE, its source computed and
        checked by the engine (docs/ARCHITECTURE.md, "Applying").

        Per key the delta holds at most a delete of the stored row and an insert: both are an
        update, one alone a delete or an insert. A key the delta repeats, a row of weight 0 or
        beyond ±1, an insert under a key the DT holds and a delete of a key it does not hold
        fail the statement (``raise_error``), so nothing is committed, and raise
        :class:`DeltaValidationError`. The rows inserted and deleted come from the commit's
        metrics (an update is one of each). The DT holds at most one row per key because every
        refresh keeps it so: a rebuild writes the query's rows, whose key the plan proves, and
        this MERGE never inserts under a key held."""
        key = list(key)
        weight = quote(WEIGHT)
        rows, least, most = f"count({weight})", f"min({weight})", f"max({weight})"
        kind = (
            f"CASE WHEN min(abs({weight})) = 0 THEN {_fail('weight-0')} "
            f"WHEN {least} < -1 OR ({rows} = 2 AND {most} < 0) THEN {_fail('not-held')} "
            f"WHEN {most} > 1 OR {rows} > 2 OR ({rows} = 2 AND {least} > 0) THEN {_fail('key-twice')} "
            f"WHEN {rows} = 2 THEN 'U' WHEN {most} > 0 THEN 'I' ELSE 'D' END"
        )
        keyed = {k.lower() for k in key}
        # One row per key: the insert's values where the key has one (the larger weight).
        values = [
            quote(c) if c.lower() in keyed else f"max_by({quote(c)}, {weight}) AS {quote(c)}" for c in columns
        ]
        group = f" GROUP BY {', '.join(quote(c) for c in key)}" if key else ""
        source = (
            f"SELECT {', '.join(values)}, {kind} AS {KIND} FROM (SELECT {self._typed(columns)}, {weight} "
            f"FROM ({delta_sql}) AS q) AS d{group} HAVING count(*) > 0"
        )

        def merge() -> None:
            with self._engine_checks(key), self._merge_source(source) as merged:
                if merged is not None:
                    self._merge_keyed(merged, key, columns)

        return self._counted(merge)

    def accumulate(self, accumulation: Accumulation) -> Tuple[int, int]:
        """Fold an insert-only delta's partials into the DT's stored groups by one MERGE on the
        group keys: a stored group's values become the folded ones (an update), a new group is
        inserted (docs/ARCHITECTURE.md, "Applying"). The partials, one row per group, never read
        the DT, so the DT is read once, by the MERGE. Rows are counted as by
        :meth:`merge_on_key`."""
        columns = self._spelled(accumulation.columns)
        on = null_safe_match(self._spelled(accumulation.keys), "t", "s")
        folded = {
            c: accumulation.folded(named, f"t.{quote(c)}", f"s.{quote(c)}")
            for named, c in zip(accumulation.columns, columns)
            if named in accumulation.kinds
        }
        source = f"SELECT {self._typed(columns)} FROM ({accumulation.sql}) AS q"
        writer = self._in_process()
        if writer is not None and self._refolded_whole():
            return self._refold(writer, source, columns, on, folded)
        if writer is not None:
            rows = self.engine.arrow(source)
            if rows.num_rows == 0:
                return 0, 0
            metrics = _merge_rows(writer, rows, on, columns, update=folded, carried=self._commit_properties())
            self._written(writer)
            inserted, updated = metrics["num_target_rows_inserted"], metrics["num_target_rows_updated"]
            return inserted + updated, metrics["num_target_rows_deleted"] + updated
        types = self._types()
        updates = ", ".join(f"{quote(c)} = CAST({fold} AS {types[c.lower()]})" for c, fold in folded.items())
        names = ", ".join(quote(c) for c in columns)

        def merge() -> None:
            with self._merge_source(source) as partials:
                if partials is not None:
                    self.engine.execute(
                        f"MERGE INTO {self.dt.relation} AS t USING {partials} AS s ON {on} "
                        f"WHEN MATCHED THEN UPDATE SET {updates} "
                        f"WHEN NOT MATCHED THEN INSERT ({names}) "
                        f"VALUES ({', '.join(f's.{quote(c)}' for c in columns)})"
                    )

        return self._counted(merge)

    def _refolded_whole(self) -> bool:
        """Whether an accumulation rewrites the DT whole (``Capabilities.refolds_small_tables``)."""
        log = self._log()
        if log is None or not self.engine.capabilities.refolds_small_tables:
            return False
        files = log.snapshot(log.latest_version()).files.values()
        return sum(f.size_bytes for f in files) < REFOLDED_BYTES

    def _refold(
        self, writer: DeltaTable, source: str, columns: List[str], on: str, folded: Dict[str, str]
    ) -> Tuple[int, int]:
        """The DT with the partials of ``source`` folded in, computed by one query that joins the
        stored groups to the touched ones, and written whole by this process in one commit: the
        groups the partials do not touch are written back as they were. Rows are counted as
        deltalake's MERGE counts them: an updated group is one row inserted and one deleted."""

        def value(column: str) -> str:
            stored, partial = f"t.{quote(column)}", f"s.{quote(column)}"
            matched = folded.get(column, stored)
            return (
                f"CASE WHEN t.{PRESENT} IS NULL THEN {partial} WHEN s.{PRESENT} IS NULL THEN {stored} "
                f"ELSE {matched} END AS {quote(column)}"
            )

        kind = f"CASE WHEN t.{PRESENT} IS NULL THEN 'I' WHEN s.{PRESENT} IS NULL THEN 'K' ELSE 'U' END"
        joined = (
            f"SELECT {', '.join(value(c) for c in columns)}, {kind} AS {KIND} "
            f"FROM (SELECT *, true AS {PRESENT} FROM {self.dt.relation}) AS t "
            f"FULL OUTER JOIN (SELECT *, true AS {PRESENT} FROM ({source}) AS p) AS s ON {on}"
        )
        rows = self.engine.arrow(f"SELECT {self._typed(columns)}, {KIND} FROM ({joined}) AS f")
        kinds = rows.column(KIND)
        inserted = int(pc.sum(pc.equal(kinds, "I")).as_py() or 0)
        updated = int(pc.sum(pc.equal(kinds, "U")).as_py() or 0)
        if inserted == updated == 0:
            return 0, 0
        schema = pa.schema(writer.schema().to_arrow())
        write_deltalake(
            writer,
            rows.select(schema.names).cast(schema),
            mode="overwrite",
            partition_by=self._partitioning() or None,
            commit_properties=self._commit_properties(),
        )
        self._written(writer)
        return inserted + updated, updated

    def compact(self, groups: Sequence[Sequence[DataFile]]) -> Tuple[int, int]:
        """Rewrite each of ``groups`` (small files of one partition, ``compact.py`` chooses them)
        into one file (more, beyond the writer's target size), changing no rows: one commit whose
        actions all have ``dataChange`` false (docs/ARCHITECTURE.md, "Compaction"). Returns the
        files it removed and added; (0, 0) when the engine found nothing to merge."""
        log = self._log()
        assert log is not None, "only an existing DT is compacted"
        writer = self._in_process()
        if writer is not None:
            added = merge_files(writer, log, groups)
            self._written(writer)
            return sum(map(len, groups)), added
        # The engine's OPTIMIZE merges the files under its minimum size: just the groups' (and, in
        # another partition, files as small as theirs).
        largest = max(f.size_bytes for group in groups for f in group)
        before = log.latest_version()
        self.engine.execute(f"SET {OPTIMIZE_MIN_FILE_SIZE}={largest + 1}")
        try:
            self.engine.execute(f"OPTIMIZE {self.dt.relation}")
        finally:
            self.engine.execute(f"RESET {OPTIMIZE_MIN_FILE_SIZE}")
        after = log.latest_version()
        if after == before:
            return 0, 0
        metrics = log.operation_metrics(after)
        return metrics.get("numRemovedFiles", 0), metrics.get("numAddedFiles", 0)

    def carry(self, user_metadata: str) -> bool:
        """Have the DT commit :meth:`accumulate` or :meth:`apply` makes record ``user_metadata``
        (docs/ARCHITECTURE.md, "Exactly once"), where this process writes it; False where the
        engine MERGEs: SQL's MERGE has no place for it."""
        if not self._writes_in_process():
            return False
        self._user_metadata = user_metadata
        return True

    def carry_in_append(self, user_metadata: str) -> bool:
        """Have the DT commit :meth:`append` makes record ``user_metadata``: the engine appends
        with the writer option for it."""
        self._user_metadata = user_metadata
        return True

    def _commit_properties(self) -> Optional[CommitProperties]:
        """What a commit this process writes on the DT records beyond its actions."""
        if self._user_metadata is None:
            return None
        return CommitProperties(custom_metadata={"userMetadata": self._user_metadata})

    def _writes_in_process(self) -> bool:
        """Whether this process writes rows it holds into the DT with deltalake: the engine allows
        it (``Capabilities.merge_in_process``) and the DT uses nothing deltalake's writer might
        not keep; else the engine writes them (docs/ARCHITECTURE.md, "Applying")."""
        log = self._log()
        if log is None or not self.engine.capabilities.merge_in_process:
            return False
        return _writable_in_process(log.snapshot(log.latest_version()))

    def carry_in_apply(self, delta: PreparedDelta) -> Carry:
        """How the commit :meth:`apply` makes of ``delta`` carries the refresh's intent: where
        this process writes it (:meth:`carry`)."""
        return lambda user_metadata: not self._masked_by_engine(delta) and self.carry(user_metadata)

    def _masked_by_engine(self, delta: PreparedDelta) -> bool:
        """Whether the engine deletes the rows ``delta`` deletes, in deletion vectors: the DT has
        them and is large (:data:`MASKED_BYTES`)."""
        if _deletes(delta).num_rows == 0:
            return False
        log = self._log()
        if log is None or not self.engine.capabilities.deletion_vectors:
            return False
        snapshot = log.snapshot(log.latest_version())
        return (snapshot.configuration.get(DELETION_VECTORS) or "").lower() == "true" and sum(
            f.size_bytes for f in snapshot.files.values()
        ) >= MASKED_BYTES

    def _in_process(self) -> Optional[DeltaTable]:
        """The DT, opened for this process to write rows it holds (:meth:`_writes_in_process`);
        else None."""
        log = self._log()
        return log.for_writing() if log is not None and self._writes_in_process() else None

    def _written(self, writer: DeltaTable) -> None:
        """After ``writer`` (:meth:`_in_process`) committed: checkpointed as the engine would,
        and the DT's next snapshot read from it rather than from the log."""
        _checkpointed(writer)
        log = self._log()
        assert log is not None, "only an existing DT is written in process"
        log.written(writer)

    def _counted(self, write: Callable[[], None]) -> Tuple[int, int]:
        """Run ``write`` (at most one MERGE or INSERT) and return the rows it inserted and
        deleted, from its commit's metrics, an update being one of each; (0, 0) when the engine
        committed nothing (nothing matched and nothing was inserted). Counting so reads one
        commit, where the log's statistics would replay the DT's files."""
        log = self._log()
        assert log is not None, "an incremental refresh applies to an existing DT"
        before = log.latest_version()
        write()
        after = log.latest_version()
        if after == before:
            return 0, 0
        return log.rows_added_and_removed(after) or (0, 0)

    @contextmanager
    def _engine_checks(self, key: Sequence[str]) -> Iterator[None]:
        """A statement inside fails with an engine check (``_fail``) as
        :class:`DeltaValidationError`, with what the check found."""
        try:
            yield
        except Exception as exc:  # noqa: BLE001 - only a check's failure is translated
            text = str(exc)
            for code, detail in ENGINE_CHECKS.items():
                if f"{ENGINE_CHECK} {code}" in text:
                    raise DeltaValidationError(detail.format(key=", ".join(key))) from None
            raise

    @contextmanager
    def _merge_source(self, source: str) -> Iterator[Optional[str]]:
        """``source`` as a MERGE reads it: inline where the engine computes a MERGE's source once,
        else computed once here (its checks run then) and read from a view of its rows; None
        when it has no rows."""
        if self.engine.capabilities.merge_source_once:
            yield f"({source})"
            return
        rows = self.engine.arrow(source)
        if rows.num_rows == 0:
            yield None
            return
        with self.engine.temporary_view(rows) as view:
            yield view

    def _merge_keyed(self, source: str, key: List[str], columns: List[str]) -> None:
        """The MERGE of :meth:`merge_on_key`, whose checks against the DT's rows are its clauses:
        an insert under a key held, or a delete or update of a key not held, fails it."""
        updated = [c for c in columns if c.lower() not in {k.lower() for k in key}] or columns
        names = ", ".join(quote(c) for c in columns)
        values = [f"s.{quote(c)}" for c in columns]
        types = self._types()
        held = _fail("key-twice", types[updated[0].lower()])
        not_held = _fail("not-held", types[columns[0].lower()])
        self.engine.execute(
            f"MERGE INTO {self.dt.relation} AS t USING {source} AS s "
            f"ON {null_safe_match(key, 't', 's')} "
            f"WHEN MATCHED AND s.{KIND} = 'D' THEN DELETE "
            f"WHEN MATCHED AND s.{KIND} = 'U' THEN UPDATE SET "
            f"{', '.join(f'{quote(c)} = s.{quote(c)}' for c in updated)} "
            f"WHEN MATCHED THEN UPDATE SET {quote(updated[0])} = {held} "
            f"WHEN NOT MATCHED AND s.{KIND} = 'I' THEN INSERT ({names}) VALUES ({', '.join(values)}) "
            f"WHEN NOT MATCHED THEN INSERT ({names}) "
            f"VALUES ({', '.join([not_held, *values[1:]])})"
        )

    def _staged(
        self, delta_sql: str, columns: List[str], key: Optional[List[str]], reads_dt: bool
    ) -> pa.Table:
        """The delta's rows, typed as the DT's columns, with ``COPIES`` (rows of the delta with the
        same tuple: 1 when consolidated) and ``OLD``: how many rows of the DT hold the row's tuple
        (no ``key``) or its key (0 when ``reads_dt`` is off); with a key, also ``KEY_*``."""
        typed = self._typed(columns)
        if not reads_dt:
            # Appended, a tuple's rows add up however they are split: no consolidation check.
            return self.engine.arrow(
                f"SELECT {typed}, {quote(WEIGHT)}, CAST(1 AS BIGINT) AS {COPIES}, CAST(0 AS BIGINT) AS {OLD} "
                f"FROM ({delta_sql}) AS q"
            )
        listed = ", ".join(quote(c) for c in columns)
        delta = (
            f"SELECT {typed}, {quote(WEIGHT)}, count(*) OVER (PARTITION BY {listed}) AS {COPIES} "
            f"FROM ({delta_sql}) AS q"
        )
        match = key if key is not None else columns
        held = ", ".join(quote(c) for c in match)
        grouped = ", ".join(f"d.{quote(c)}" for c in [*columns, WEIGHT, COPIES])
        joined = (
            f"SELECT {grouped}, count(t.{PRESENT}) AS {OLD} FROM ({delta}) AS d "
            f"LEFT JOIN (SELECT {held}{', ' if held else ''}1 AS {PRESENT} FROM {self.dt.relation}) AS t "
            f"ON {null_safe_match(match, 'd', 't')} GROUP BY {grouped}"
        )
        per_key = ""
        if key is not None:
            window = f"PARTITION BY {', '.join(quote(c) for c in key)}" if key else ""
            per_key = (
                f", max({OLD}) OVER ({window}) AS {KEY_OLD}, sum({WEIGHT}) OVER ({window}) AS {KEY_WEIGHT}"
                f", row_number() OVER ({window} ORDER BY {WEIGHT}) AS {KEY_RANK}"
            )
        return self.engine.arrow(f"SELECT *{per_key} FROM ({joined}) AS j")

    @staticmethod
    def _keys_holding_two_rows(with_old: pa.Table) -> int:
        """How many keys hold more than one row in the DT now, or would after the delta."""
        old, after = with_old.column(KEY_OLD), pc.add(with_old.column(KEY_OLD), with_old.column(KEY_WEIGHT))
        broken = pc.and_(
            pc.equal(with_old.column(KEY_RANK), 1), pc.or_(pc.greater(old, 1), pc.greater(after, 1))
        )
        return int(pc.sum(broken).as_py() or 0)

    def _validated(self, delta: PreparedDelta) -> PreparedDelta:
        """``delta``, unless it deletes rows (or keyed rows) the DT does not hold."""
        rows = delta.rows
        if delta.key is None:
            remaining = pc.add(rows.column(OLD), rows.column(WEIGHT))
        else:
            remaining = pc.add(rows.column(KEY_OLD), rows.column(KEY_WEIGHT))
        if pc.min(remaining).as_py() < 0:
            raise DeltaValidationError("the delta deletes rows the table does not hold")
        return delta

    def _check_consolidated(self, rows: pa.Table) -> None:
        if pc.any(pc.equal(rows.column(WEIGHT), 0)).as_py():
            raise DeltaValidationError("the delta has rows of weight 0")
        repeated = int(pc.sum(pc.greater(rows.column(COPIES), 1)).as_py() or 0)
        if repeated:
            raise DeltaValidationError(
                f"the delta holds {repeated} row(s) more than once (it was not consolidated)"
            )

    def apply(self, delta: PreparedDelta) -> Tuple[int, int]:
        """One commit. Insert-only: an INSERT of weight copies. Otherwise one MERGE that deletes
        every copy of each touched tuple and inserts back old + weight copies; with a row key, it
        deletes the row stored under each key the delta deletes and inserts the delta's inserts."""
        rows, columns = delta.rows, self._spelled(delta.columns)
        copies = pc.add(rows.column(OLD), rows.column(WEIGHT)) if delta.key is None else rows.column(WEIGHT)
        deletes = _deletes(delta).select(delta.columns).rename_columns(columns)
        inserts = _repeated(rows, copies).select(delta.columns).rename_columns(columns)
        names = ", ".join(quote(c) for c in columns)
        writer = None if self._masked_by_engine(delta) else self._in_process()
        if deletes.num_rows == 0:
            if writer is not None:
                schema = pa.schema(writer.schema().to_arrow())
                rows_in = inserts.select(schema.names).cast(schema)
                write_deltalake(writer, rows_in, mode="append", commit_properties=self._commit_properties())
                self._written(writer)
                return delta.inserted, delta.deleted
            with self.engine.temporary_view(inserts) as view:
                self.engine.execute(f"INSERT INTO {self.dt.relation} ({names}) SELECT {names} FROM {view}")
            return delta.inserted, delta.deleted
        source = pa.concat_tables(
            [
                deletes.append_column(KIND, pa.array(["D"] * deletes.num_rows, pa.string())),
                inserts.append_column(KIND, pa.array(["I"] * inserts.num_rows, pa.string())),
            ]
        )
        match = self._spelled(delta.key) if delta.key is not None else columns
        on = f"{null_safe_match(match, 't', 's')} AND s.{KIND} = 'D'"
        if writer is not None:
            _merge_rows(
                writer,
                source,
                on,
                columns,
                delete=True,
                insert_when=f"s.{KIND} = 'I'",
                carried=self._commit_properties(),
            )
            self._written(writer)
            return delta.inserted, delta.deleted
        with self.engine.temporary_view(source) as view:
            self.engine.execute(
                f"MERGE INTO {self.dt.relation} AS t USING {view} AS s ON {on} "
                "WHEN MATCHED THEN DELETE "
                f"WHEN NOT MATCHED AND s.{KIND} = 'I' THEN INSERT ({names}) "
                f"VALUES ({', '.join(f's.{quote(c)}' for c in columns)})"
            )
        return delta.inserted, delta.deleted


def _checkpointed(table: DeltaTable) -> None:
    """After a write by this process: a checkpoint at the versions where the engine would have
    written one (the DT's ``delta.checkpointInterval``, else Delta's default). deltalake's own
    default is 100: without this, every reader of a DT written here replays up to 100 commits."""
    configured = table.metadata().configuration.get(CHECKPOINT_INTERVAL)
    if table.version() % int(configured or DEFAULT_CHECKPOINT_INTERVAL) == 0:
        table.create_checkpoint()


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
    data_schema = pa.schema([f for f in schema if f.name not in partition_by])
    # The DT's file settings, so the new files are written as its other files are.
    configuration = {k: v for k, v in snapshot.configuration.items() if k in FILE_SETTINGS}
    folder = f"{root}/{COMPACTION_FOLDER}{uuid.uuid4().hex}"
    actions: List[Any] = []
    added = 0
    try:
        for number, group in enumerate(groups):
            files = [log.file_path(f) for f in group]
            rows = pads.dataset(
                [path for _, path in files], schema=data_schema, filesystem=files[0][0]
            ).to_table()
            for name in partition_by:
                column = schema.field(name)
                value = group[0].partition_values.get(name)
                rows = rows.append_column(column, pa.array([value] * rows.num_rows, column.type))
            written = f"{folder}/{number}"
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
                actions.append(
                    AddAction(
                        add["path"],
                        add["size"],
                        add["partitionValues"],
                        add["modificationTime"],
                        False,
                        add["stats"],
                    )
                )
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


def _merge_rows(
    table: DeltaTable,
    rows: pa.Table,
    on: str,
    columns: Sequence[str],
    update: Optional[Dict[str, str]] = None,
    delete: bool = False,
    insert_when: Optional[str] = None,
    carried: Optional[CommitProperties] = None,
) -> Dict[str, int]:
    """One deltalake MERGE of ``rows`` (``s``) into ``table`` (``t``) in this process, returning
    its metrics: a matched row gets ``update`` (column: Spark SQL) or, with ``delete``, is
    deleted; an unmatched one (where ``insert_when`` holds) is inserted as ``columns``; its
    commit carries ``carried``. deltalake casts what it writes to the table's schema, as the
    engine's MERGE does with its CASTs."""
    merge = table.merge(
        rows, datafusion_sql(on), source_alias="s", target_alias="t", commit_properties=carried
    )
    if update:
        merge = merge.when_matched_update(
            {datafusion_sql(quote(c)): datafusion_sql(v) for c, v in update.items()}
        )
    if delete:
        merge = merge.when_matched_delete()
    inserted = {datafusion_sql(quote(c)): datafusion_sql(f"s.{quote(c)}") for c in columns}
    merge = merge.when_not_matched_insert(inserted, datafusion_sql(insert_when) if insert_when else None)
    return {name: int(value) for name, value in merge.execute().items()}


def _deletes(delta: PreparedDelta) -> pa.Table:
    """The DT's rows :meth:`DeltaApplier.apply` deletes: every copy of each touched tuple the DT
    holds, or with a row key, the row stored under each key the delta deletes."""
    rows = delta.rows
    if delta.key is None:
        return rows.filter(pc.greater(rows.column(OLD), 0))
    # One delete per key: the stored row under it (deletes rank first within a key).
    first = pc.equal(rows.column(KEY_RANK), 1)
    held = pc.and_(pc.less(rows.column(WEIGHT), 0), pc.greater(rows.column(OLD), 0))
    return rows.filter(pc.and_(first, held))


def _repeated(rows: pa.Table, copies: pa.ChunkedArray) -> pa.Table:
    """Each row of ``rows`` repeated ``copies`` times (none when ``copies`` <= 0)."""
    counts = np.maximum(copies.to_numpy(), 0)
    if (counts == 1).all():
        return rows
    return rows.take(pa.array(np.repeat(np.arange(len(counts)), counts)))
