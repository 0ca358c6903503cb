"""What every engine offers the adapter, and what each one can do.

Engine differences live here and in the engine modules beside this one; the rest of the code asks
an :class:`Engine` for a Spark session and reads its :class:`Capabilities` instead of checking
which engine it runs on.
"""

from __future__ import annotations

import re
import uuid
from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Dict, Iterator, List, Optional, Sequence, Tuple

from dbt.adapters.dyntable.delta_log import DeltaLog, note_write
from dbt.adapters.dyntable.vocabulary import quote, sql_string

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


#: PySpark's DataFrame debugging, off unless a profile turns it on: with it on, every DataFrame
#: function call records its call site for error messages (an import tried and failed per call
#: over Spark Connect, four JVM calls on JVM Spark), ~0.5 ms a column when a refresh builds its
#: change views; the call sites would name dbt-dyntable's code, never the user's.
DATAFRAME_DEBUGGING = "spark.python.sql.dataFrameDebugging.enabled"

#: Statements that may change what the catalog says of a table or view.
_CHANGES_CATALOG = re.compile(
    # dbt starts each statement with its query comment (/* {"app": "dbt", ...} */)
    r"(?:\s|/\*.*?\*/|--[^\n]*\n)*(CREATE|DROP|ALTER|REPLACE|RESTORE|TRUNCATE|MSCK|REFRESH|USE)\b",
    re.IGNORECASE | re.DOTALL,
)


#: Stopped Spark Connect sessions, kept for the life of the process: pyspark 4.0's session
#: finalizer shuts down the thread pool all Connect clients share, and run by the garbage
#: collector while this thread submits to that pool, it hangs the process (docs/ARCHITECTURE.md,
#: "Engines"). A stopped session is closed already; keeping it costs a few objects.
_stopped_sessions: List["SparkSession"] = []


def stop_connect_session(spark: "SparkSession") -> None:
    """Stop a Spark Connect session where its finalizer cannot run mid-query."""
    _stopped_sessions.append(spark)
    try:
        spark.stop()
    except Exception:  # noqa: BLE001 - the server may already be gone
        pass


class EngineError(RuntimeError):
    """An engine could not start or stopped working; the message names the setting to fix."""


#: What a statement that :meth:`Engine.interrupt` cancelled failed with.
INTERRUPTED = "interrupted (Ctrl-C): its statement was cancelled"


class EngineGap(RuntimeError):
    """A statement the engine would run wrongly (a gap listed by
    tests/functional/test_engine_conformance.py): refused, the message naming what to write
    instead, rather than run into wrong data."""


@dataclass(frozen=True)
class Capabilities:
    """Constructs an engine has or lacks; generated SQL consults these, never the engine name."""

    change_data_feed: bool
    """`table_changes` / `readChangeFeed` exist (JVM Delta); otherwise changes come from file sets."""
    truncate: bool
    """`TRUNCATE TABLE` is a statement the engine accepts."""
    alter_table_columns: bool
    """`ALTER TABLE ... ADD/RENAME COLUMNS` works."""
    persistent_catalog: bool
    """The catalog outlives the session; otherwise the engine re-attaches persisted tables."""
    time_travel_behind_checkpoint: bool = True
    """`VERSION AS OF v` reads versions older than the table's latest checkpoint. Sail 0.7 fails
    on most of them ("Missing commit file"): such versions are read from their files instead."""
    versions_from_files: int = 0
    """A read of a table at a version goes to the version's data files, not to the engine's Delta
    scan, where the table's reader protocol is 1 (its rows are its files' rows) and the version
    has at most this many files, on a local file system. delta-spark's scan of a version starts
    a Spark job to filter its files, and in a fresh driver first loads Delta's planning: a refresh
    that is the first of its process paid seconds for it (docs/ARCHITECTURE.md, "Engines")."""
    merge_source_once: bool = True
    """A MERGE computes its source once (delta-spark materializes it), so a source that reads
    tables is given to it inline. Sail 0.7 plans a MERGE's source four times over, each reading
    every table again: there a refresh computes the source once and merges from its rows."""
    merge_in_process: bool = False
    """This process may write rows it holds (a MERGE, an append) into the engine's Delta tables
    itself, with the `deltalake` package, between the engine's statements: the engine reads a
    table's log afresh for each statement. Sail 0.7's MERGE of a few hundred rows costs 50-90 ms
    and a view to hand it the rows, delta-spark's seconds of Spark jobs (materializing its source,
    rebuilding the DT's state, rewriting files); deltalake's costs about 25 ms."""
    merge_condition_recorded: bool = False
    """A MERGE's commit records the text of its ON condition (Sail 0.7's ``mergePredicate``), so a
    constant conjunct there carries a refresh's intent in the DT's commit, where no metadata
    commit then goes before it (docs/ARCHITECTURE.md, "Exactly once"). delta-spark records the
    condition as optimized, the constant folded away."""
    refolds_small_tables: bool = False
    """With ``merge_in_process``: an accumulation of inserts into a DT whose files weigh less than
    ``deltalake_writer.REFOLDED_BYTES`` is folded by one query that reads the DT beside the
    partials, and this process writes the DT whole (about 7 ms for a few hundred groups, where
    deltalake's MERGE of the same rows takes 17-20). On Sail 0.7 a small table's scan costs
    milliseconds; on delta-spark a Delta scan is a Spark job, dearer than the MERGE it would save."""
    counts_held_rows_in_process: bool = False
    """A delta staged in this process has the copies a small DT holds of its rows counted here,
    from the DT's files (``refresh/held_rows.py``), not by an engine job reading the DT. On
    delta-spark such a job first rebuilds the DT's new version: about 2 s for one row updated in
    a DT of a million rows, against tens of milliseconds here. Sail's scan skips by the delta's
    bounds in milliseconds."""
    job_cost_bytes: int = 0
    """What each engine job a refresh runs costs beyond the bytes AUTO counts for it, as bytes of
    a recompute's scan: the job's shuffles (consolidating the delta, joining it to the DT,
    grouping) and the trip through the driver (docs/ARCHITECTURE.md, "Deciding"); a recompute's
    own job, computing what differs from the DT, pays it too. Tens of
    milliseconds on Sail, within its byte costs; on local delta-spark about 1.5 s per job, which a
    recompute spends scanning about 8 MB (benchmarks/jvm_spark.py). Staging a delta in this
    process takes two jobs (the delta's, then the count of what the DT holds of it), or one where
    this process counts (``counts_held_rows_in_process``); the engine's MERGE of a delta on a
    proven key two (finding the files it touches, rewriting them)."""
    grouping_cost: float = 1.0
    """What a byte grouped by every column costs, as bytes of a scan: AUTO's price of a
    rewritten input's net change (both versions of its changed files) and of a recompute's
    difference from the DT (the query's rows and the DT's), as against the joins and scans of an
    incremental refresh (docs/ARCHITECTURE.md, "Deciding"). By default, as much as a scanned one.
    ``benchmarks/grouping_cost.py`` measures it on a 9-column table of 4M rows: about 3-6 on
    Sail 0.7, 5-6 on local delta-spark."""
    files_per_scan: int = 0
    """A read of many data files (an interval's, after a run of small commits) is split into
    scans of at most this many files (0: one scan). Sail 0.7 opens every file of a scan at once
    while it plans it: a refresh after thousands of one-row commits failed with "Too many open
    files"; scans of 100 files kept a process under 150 open files and planned 2,000 files in
    0.55 s, against 3.5 s as one scan (docs/ARCHITECTURE.md, "Reading sources")."""
    parquet_scan_merges_file_types: bool = True
    """A scan of several Parquet files merges the Arrow schema each file declares in its footer,
    and fails where two differ: Sail 0.7 takes ``string`` and ``string_view`` only at the top
    level, and no other pair (``large_string``, a view type inside a struct, timestamp units,
    dictionaries), and the ``deltalake`` package writes an UPDATE's files with view types, its
    appends without. Files are then read one scan per declared schema (docs/ARCHITECTURE.md,
    "Reading sources"). JVM Spark reads Parquet's own types and ignores the Arrow schema."""
    deletion_vectors: bool = False
    """A MERGE, DELETE or UPDATE of a table with ``delta.enableDeletionVectors`` marks the rows
    it removes in a deletion vector instead of rewriting their files (delta-spark 3.1 and later,
    Sail 0.7): dynamic tables are created with it, so that a refresh changing a few rows of a
    large one leaves its readers a few rows to read (docs/ARCHITECTURE.md, "Rewritten inputs")."""
    escaped_table_paths: bool = True
    """A table whose name needs escaping in a path (a space, a non-ASCII letter) keeps its log
    where its catalog entry says. Sail 0.7 escapes such a location once for the log and twice for
    the data files, and reports it unescaped: its Delta log cannot be found."""


class Engine(ABC):
    """A running Spark-compatible engine with one Spark session for this process."""

    name: ClassVar[str]
    capabilities: ClassVar[Capabilities]

    @property
    @abstractmethod
    def spark(self) -> "SparkSession":
        """The engine's Spark session (Spark Connect or classic)."""

    @abstractmethod
    def stop(self) -> None:
        """Stop what this engine started; safe to call twice."""

    statements_run: int = 0
    """Statements this engine ran for the adapter; a NO_DATA refresh must not add to it."""

    interrupted: bool = False
    """Set by :meth:`interrupt` until :meth:`resume`: a statement failing meanwhile was cancelled,
    and a new one is refused."""

    _catalog_memo: Optional[Dict[Tuple[str, str], Dict[str, str]]] = None

    def execute(self, statement: str) -> "DataFrame":
        """Run one SQL statement (DDL, DML or a query) the way this engine needs it run."""
        self._admit()
        note_write()  # it may write a table: logs this process holds are listed again
        if not _CHANGES_CATALOG.match(statement):
            return self._run(statement)
        self.forget_catalog()
        try:
            return self._run(statement)
        finally:
            self.forget_catalog()

    def append(self, relation: str, query: str, user_metadata: Optional[str] = None) -> None:
        """Append ``query``'s rows to the Delta table ``relation``, its columns matched by name, in
        one commit whose ``commitInfo.userMetadata`` is ``user_metadata`` (a writer option: SQL's
        INSERT has no place for it)."""
        self._admit()
        note_write()
        writer = self._query(query).writeTo(self._table_name(relation))
        if user_metadata is not None:
            writer = writer.option("userMetadata", user_metadata)
        writer.append()

    def arrow(self, query: str) -> "pa.Table":
        """``query``'s rows, handed to this process as Arrow (a delta on its way into a MERGE
        this process writes, or into a check)."""
        self._admit()
        return self._arrow(query)

    def _admit(self) -> None:
        """Count a statement about to run; refuse it after an interrupt."""
        if self.interrupted:  # one in flight at the interrupt would have been cancelled
            raise EngineError(INTERRUPTED)
        self.statements_run += 1

    def _arrow(self, query: str) -> "pa.Table":
        return self._query(query).toArrow()

    def _query(self, query: str) -> "DataFrame":
        """A DataFrame of ``query``'s rows, for a write or a fetch to run: classic Spark's
        ``sql`` only plans a query; engines whose ``sql`` sends it to a server first override
        this to send it once, with the write or fetch (docs/ARCHITECTURE.md, "Cost of a refresh")."""
        return self._run(query)

    def _table_name(self, relation: str) -> str:
        """``relation`` as this engine's DataFrame API finds the table (as :meth:`_run` would
        spell it in a statement)."""
        return relation

    def _run(self, statement: str) -> "DataFrame":
        """Hand a statement to Spark unchanged; engines that must adapt DDL (the embedded one)
        override this, so no caller ever special-cases an engine."""
        return self.spark.sql(statement)

    def replace_table(self, schema: str, name: str, query: str, partition_by: Sequence[str]) -> None:
        """Replace the Delta table's rows, schema and partitioning with ``query``'s in one commit,
        keeping its history and location; its columns stay nullable, as Spark's CTAS keeps them."""
        location = self.table_location(schema, name)
        partitioned = f" PARTITIONED BY ({', '.join(quote(c) for c in partition_by)})" if partition_by else ""
        self.execute(
            f"CREATE OR REPLACE TABLE {quote(schema)}.{quote(name)} USING delta{partitioned} "
            f"LOCATION {sql_string(str(location))} AS {query}"
        )

    def schema_of(self, query: str) -> "StructType":
        """The columns ``query`` returns (analysis only: no job runs)."""
        return self.execute(query).schema

    @contextmanager
    def temporary_view(self, rows: "pa.Table") -> Iterator[str]:
        """Rows this process holds, as a temporary view of the engine, dropped afterwards."""
        view = f"dyntable_rows_{uuid.uuid4().hex[:12]}"
        arrow_frame(self.spark, rows).createOrReplaceTempView(view)
        try:
            yield view
        finally:
            self.spark.catalog.dropTempView(view)

    def catalog_entry(self, schema: str, name: str) -> Dict[str, str]:
        """The catalog's description of one table or view (`SHOW TABLE EXTENDED`'s
        ``Key: value`` lines, e.g. Type, Location, View Text); empty if it does not exist.

        Remembered until this engine runs a statement that changes the catalog or
        :meth:`forget_catalog` is called (at each end of a dbt invocation or a runner tick): a
        refresh asks for its DT and each source several times, and a catalog lookup costs a
        metastore query on JVM Spark (docs/ARCHITECTURE.md, "Cost of a refresh")."""
        key = (schema.lower(), name.lower())
        memo = self._catalog_memo
        if memo is None:
            memo = self._catalog_memo = {}
        entry = memo.get(key)
        if entry is None:
            if self.interrupted:  # a new lookup is a statement too (on JVM Spark, a metastore query)
                raise EngineError(INTERRUPTED)
            entry = memo[key] = self._catalog_entry(schema, name)
        return dict(entry)

    def forget_catalog(self) -> None:
        """Ask the catalog afresh from now on (another process may have changed it)."""
        self._catalog_memo = {}

    def _catalog_entry(self, schema: str, name: str) -> Dict[str, str]:
        """:meth:`catalog_entry` from the catalog itself: `SHOW TABLE EXTENDED`."""
        try:
            rows = self._run(f"SHOW TABLE EXTENDED IN {quote(schema)} LIKE {sql_string(name)}").collect()
        except Exception:  # noqa: BLE001 - a missing schema means a missing table
            return {}
        entry: Dict[str, str] = {}
        for row in rows:
            if row["tableName"].lower() != name.lower():
                continue
            for line in (row["information"] or "").splitlines():
                key, sep, value = line.partition(": ")
                if sep and key and not key.startswith(" "):
                    entry.setdefault(key, value.strip())
        return entry

    def table_location(self, schema: str, name: str) -> Optional[str]:
        """Where a Delta table keeps its files (a path or URI), or None if it does not exist."""
        location = self.catalog_entry(schema, name).get("Location")
        return location.removeprefix("file:") if location and location.startswith("file:/") else location

    def engine_location(self, location: str) -> str:
        """``location`` (a path, or an object store's URL as the adapter names it) as this
        engine's statements name it: JVM Spark reads S3 through Hadoop's ``s3a://``."""
        return location

    def delta_log(
        self, name: str, *, hold_listing: bool = False, since: Optional[int] = None
    ) -> Optional[DeltaLog]:
        """The Delta log of the table ``name`` (``schema.table``); None if it is not a Delta
        table of this engine. With ``hold_listing``, the log answers from the listing its
        existence check took (:meth:`DeltaLog.hold_listing`): one listing per source per refresh.
        ``since``: the version the caller asks about first (an object store's log is listed from
        there: docs/ARCHITECTURE.md, "Object storage")."""
        schema, table = name.split(".", 1)
        location = self.table_location(schema, table)
        if location is None:
            return None
        log = DeltaLog(location, since=since)
        if hold_listing:
            log.hold_listing()
        return log if log.exists() else None

    def view_definition(self, schema: str, name: str) -> Optional[str]:
        """A view's SELECT, or None if ``schema.name`` is not a view."""
        entry = self.catalog_entry(schema, name)
        return entry.get("View Text") if entry.get("Type") == "VIEW" else None

    def explain_failure(self, error: Exception) -> str:
        """One clear message for a failed statement; engines add what only they know."""
        return str(error).strip()

    def read_moved_on(self, error: Exception) -> bool:
        """Whether ``error`` says a table a statement read at a version moved on meanwhile in a
        way this engine cannot read that version through (the statement may run again)."""
        return False

    def failure_message(self, error: Exception) -> str:
        """What to tell the user of a failed statement: that Ctrl-C cancelled it, or the
        engine's :meth:`explain_failure`."""
        return INTERRUPTED if self.interrupted else self.explain_failure(error)

    def interrupt(self) -> None:
        """Cancel the statements running now, in every thread (dbt cancels its connections on
        Ctrl-C): each fails in the thread that waits for it, and what fails until :meth:`resume`
        says it was interrupted (docs/ARCHITECTURE.md, "Interrupting a run")."""
        self.interrupted = True
        try:
            self.spark.interruptAll()
        except Exception:  # noqa: BLE001 - an engine that cannot answer runs nothing to cancel
            pass

    def resume(self) -> None:
        """The interrupted invocation has ended: later failures are the statements' own."""
        self.interrupted = False


def arrow_frame(
    spark: "SparkSession", rows: "pa.Table", schema: "Optional[StructType]" = None
) -> "DataFrame":
    """Rows this process holds as a DataFrame of their columns, none included: Spark Connect
    cannot infer the columns of an Arrow table without rows, so they are given. ``schema``, where
    the rows stand for a table's, gives its types (Arrow's naive timestamp is Spark's
    TIMESTAMP_NTZ or TIMESTAMP by a session setting)."""
    if rows.num_rows:
        return spark.createDataFrame(rows, schema)
    from pyspark.sql.pandas.types import from_arrow_schema

    return spark.createDataFrame([], schema or from_arrow_schema(rows.schema))
