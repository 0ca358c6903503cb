"""The embedded engine: LakeSail's Sail started inside this process, Delta tables in its warehouse.

Sail is a Rust Spark Connect server; PySpark connects to it on 127.0.0.1 with one pinned session
id. Sail's catalog lives in that session's memory only, so this module persists every table at an
explicit location under the warehouse and every view's statement beside it, and re-attaches both
when the engine starts (see :mod:`.warehouse`). Statements that Sail runs differently from Spark
are adapted here and nowhere else:

* a ``CREATE TABLE`` without ``LOCATION`` gets one under the warehouse, and is Delta without
  ``USING``; another format is refused, as the warehouse re-attaches Delta tables only;
* a CTAS creating a new table first creates it empty with the query's schema made nullable,
  because Sail's CTAS marks columns NOT NULL where Spark keeps them nullable;
* a ``CREATE OR REPLACE ... AS`` changing an existing table's columns or partitioning replaces its
  schema, as Delta's does, where Sail's would keep the old columns and cast the rows to them;
* ``DROP TABLE`` / ``DROP SCHEMA`` delete the files Sail would leave behind;
* schema, table and view names are lowered, as Spark's catalog resolves them case-insensitively
  and Sail's only as spelled.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Dict, List, Mapping, Optional, Set, Union

import sqlglot
from sqlglot import exp

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.delta_log import DeltaLog
from dbt.adapters.dyntable.engines import isolated
from dbt.adapters.dyntable.engines.base import (
    DATAFRAME_DEBUGGING,
    Capabilities,
    Engine,
    EngineError,
    EngineGap,
    stop_connect_session,
)
from dbt.adapters.dyntable.engines.isolated import IsolatedServer
from dbt.adapters.dyntable.engines.sigint import SigintAction
from dbt.adapters.dyntable.engines.warehouse import (
    AttachReport,
    PersistedTable,
    Warehouse,
    canonical_names,
    lowered_names,
    parse_ddl,
)
from dbt.adapters.dyntable.vocabulary import DIALECT, first_line, quote

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructField, StructType

logger = logging.getLogger(__name__)

#: A set operation's keyword: a query without one needs no parse to check its branches' types.
_SET_OPERATION = re.compile(r"\b(union|intersect|except|minus)\b", re.IGNORECASE)

#: How Sail 0.7 fails to plan a window ordered by another window's column over one row
#: (docs/ARCHITECTURE.md, "Engines").
_WINDOW_ORDER_GAP = "does not satisfy order requirements"

#: How Sail 0.7 fails to read a Delta version behind a checkpoint written after the refresh
#: decided to read it with ``VERSION AS OF`` (docs/ARCHITECTURE.md, "Engines").
_CHECKPOINT_PASSED_VERSION = "Missing commit file: expected version"

#: Sail ends an idle pinned session after 900 s by default; a long `dyntable run` must outlive that.
SESSION_TIMEOUT_ENV = "SAIL_SPARK__SESSION_TIMEOUT_SECS"
DEFAULT_SESSION_TIMEOUT_SECS = 7 * 24 * 3600


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class EmbeddedEngine(Engine):
    """Sail in-process, on 127.0.0.1, with its catalog persisted in a warehouse directory."""

    name: ClassVar[str] = "embedded"
    #: The object-store settings this process's Sail was given (``_apply_object_store_environment``).
    _object_store_environment: ClassVar[Optional[Dict[str, str]]] = None
    capabilities: ClassVar[Capabilities] = Capabilities(
        change_data_feed=False,
        truncate=False,
        alter_table_columns=False,
        persistent_catalog=False,
        time_travel_behind_checkpoint=False,
        merge_source_once=False,
        merge_in_process=True,
        refolds_small_tables=True,
        escaped_table_paths=False,
        deletion_vectors=True,
        files_per_scan=100,
    )

    #: Settings the engine makes itself: the generated SQL and the warehouse layout rely on them.
    OWN_SETTINGS: ClassVar[Dict[str, str]] = {
        "spark.sql.warehouse.dir": "the warehouse is the profile's `warehouse`",
        "spark.sql.ansi.enabled": "dbt-dyntable's generated SQL relies on non-ANSI casts",
        "spark.sql.session.timeZone": "Delta stores timestamps in UTC; Sail types them with the session zone",
        "spark.sql.sources.default": "the embedded engine keeps Delta tables only",
    }

    #: Whether this process said its engines' servers cannot be isolated.
    _unisolated_said: ClassVar[bool] = False

    def __init__(
        self,
        warehouse: Union[str, Path, storage.Storage],
        port: int = 0,
        conf: Optional[Mapping[str, str]] = None,
    ) -> None:
        self.warehouse = Warehouse(warehouse)
        self.port = port
        self.conf = dict(conf or {})
        self._server: Any = None
        self._spark: Optional["SparkSession"] = None
        self._ddl_lock = threading.Lock()
        #: Every schema, table and view name of the catalog (lower case), and more: a statement
        #: spelling one of them in another case has it lowered (:func:`canonical_names`).
        self._names: Set[str] = set()
        #: Per schema, the names of its saved views, listed once per batch in an object store.
        self._view_names: Dict[str, Set[str]] = {}

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> "EmbeddedEngine":
        self.warehouse.ensure_writable()
        if self.port and not _port_is_free(self.port):
            raise EngineError(
                f"Port {self.port} on 127.0.0.1 is already in use, so the embedded engine cannot "
                "listen there. Set `port` in your profile to a free port, or remove it to let the "
                "engine pick one."
            )
        os.environ.setdefault(SESSION_TIMEOUT_ENV, str(DEFAULT_SESSION_TIMEOUT_SECS))
        self._apply_object_store_environment()
        # Sail logs every session at INFO otherwise, and warns of the tasks it aborts at every stop.
        os.environ.setdefault("RUST_LOG", "warn,sail_common::actor=error")
        try:
            from pysail.spark import SparkConnectServer
            from pyspark.sql import SparkSession
            from pyspark.sql.connect.client.retries import DefaultPolicy
            from pyspark.sql.connect.session import SparkSession as ConnectSession
        except ImportError as exc:  # pragma: no cover - both are hard dependencies
            raise EngineError(
                f"The embedded engine needs pysail and pyspark ({exc}). Reinstall dbt-dyntable."
            ) from exc

        session_id = str(uuid.uuid4())
        sigint: Optional[SigintAction] = None
        builder: Any
        isolated = self._isolated()
        if isolated is not None:
            self._server, self.port = isolated, isolated.port
            # What a `remote()` builder marks before it creates a session: PySpark's functions
            # (F.col, ...) build Spark Connect expressions only in a process so marked.
            os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
            builder = ConnectSession.builder.channelBuilder(isolated.channel_builder(session_id))
        else:
            server = SparkConnectServer("127.0.0.1", self.port)
            sigint = SigintAction()  # the server takes SIGINT for itself (sigint.py)
            try:
                server.start(background=True)
            except Exception as exc:
                raise EngineError(
                    f"The embedded engine could not listen on 127.0.0.1:{self.port} ({exc}). "
                    "Set `port` in your profile to a free port, or remove it."
                ) from exc
            self._server = server
            host, port = server.listening_address
            self.port = port
            builder = SparkSession.builder.remote(f"sc://{host}:{port}/;session_id={session_id}")
        try:
            # create(), not getOrCreate(): the latter hands back any Spark Connect session already
            # open in this process (another engine's, on another server and warehouse).
            spark = builder.create()
            # The server is this process's own: if it stops answering it is gone, and Spark
            # Connect's default policy would retry for ten minutes before saying so.
            spark.client.set_retry_policies([DefaultPolicy(max_retries=4, max_backoff=1000)])
            spark.conf.set("spark.sql.warehouse.dir", str(self.warehouse.root))
            spark.conf.set("spark.sql.ansi.enabled", "false")
            # Sail types `timestamp` columns with the session zone, and Delta stores them as UTC:
            # re-attaching under another zone name ("Etc/UTC") is refused as a schema mismatch.
            spark.conf.set("spark.sql.session.timeZone", "UTC")
            # A table created without USING (dbt-spark's, where `file_format` is not set) is Delta,
            # the one format the warehouse re-attaches and dynamic tables read.
            spark.conf.set("spark.sql.sources.default", "delta")
            spark.conf.set(DATAFRAME_DEBUGGING, "false")
            self._apply_settings(spark)
            self._spark = spark
            report = self.warehouse.attach(spark)
            self._names = self.warehouse.names()
        except Exception:
            self.stop()
            raise
        self._log_attached(report)
        if sigint is not None:
            sigint.restore()
        return self

    def _apply_object_store_environment(self) -> None:
        """Give Sail the warehouse's object-store settings, from the environment it reads them
        from (docs/ARCHITECTURE.md, "Object storage"). Sail reads them once per process, at its
        first request to a store, so a second warehouse with other settings in this process
        would read and write the first one's store: refused, with the way out."""
        wanted = self.warehouse.storage.engine_environment()
        if not wanted:
            return
        given = EmbeddedEngine._object_store_environment
        if given is not None and given != wanted:
            raise EngineError(
                f"The embedded engine for warehouse {self.warehouse.root} needs other object-store "
                "settings (endpoint, region or credentials) than the one this process already started, "
                "and Sail keeps the first ones for the life of the process: it would read and write the "
                "other store. Run each of these targets in a process of its own (one dbt or dyntable "
                "command per target)."
            )
        EmbeddedEngine._object_store_environment = dict(wanted)
        os.environ.update(wanted)

    def _isolated(self) -> Optional[IsolatedServer]:
        """The server in a process of its own that only this one reaches (``isolated.py``),
        unless the profile names a ``port`` (to reach it from other tools on purpose) or this
        system allows no unprivileged user namespaces (then a warning says so, once)."""
        if self.port:
            return None
        try:
            # An object store is reached through the child's egress process (``isolated.py``).
            return isolated.start(way_out=self.warehouse.remote)
        except isolated.Unisolated as exc:
            self._say_unisolated(f"this system allows no unprivileged user namespaces ({exc})")
            return None
        except RuntimeError as exc:
            raise EngineError(f"The embedded engine did not start: {exc}.") from exc

    def _log_attached(self, report: AttachReport) -> None:
        for view, error in report.broken_views or []:
            logger.warning("dyntable: view %s could not be re-attached: %s", view, error)
        for table, error in report.broken_tables:
            logger.warning(
                "dyntable: table %s is damaged and left out of the catalog until it is repaired "
                "(for a metadata table: `dyntable repair`): %s",
                table,
                error,
            )
        logger.debug(
            "dyntable: embedded engine on %s attached %s tables and %s views from %s",
            self.address,
            report.tables,
            report.views,
            self.warehouse.root,
        )

    @classmethod
    def _say_unisolated(cls, why: str) -> None:
        if not cls._unisolated_said:
            cls._unisolated_said = True
            logger.warning(
                "dyntable: the embedded engine's server listens on 127.0.0.1, where any local "
                "process can reach it: %s, so it cannot run in a network of its own out of their "
                'reach (docs/ARCHITECTURE.md, "Engines").',
                why,
            )

    def _apply_settings(self, spark: "SparkSession") -> None:
        """The profile's `server_side_parameters`, as session settings. Sail takes any key and
        checks a value only when a query reads it, so each is tried with a query at once: a bad
        one fails here, naming itself, not in the middle of a model."""
        for key, value in self.conf.items():
            reason = self.OWN_SETTINGS.get(key)
            if reason is not None:
                raise EngineError(
                    f"`server_side_parameters` sets {key}, which the embedded engine sets itself "
                    f"({reason}). Remove it from the profile."
                )
            spark.conf.set(key, value)
            try:
                spark.sql("SELECT 1").collect()
            except Exception as exc:
                raise EngineError(
                    f"`server_side_parameters`: the embedded engine (Sail) refused {key} = {value!r} "
                    f"({first_line(exc)}). Fix or remove it in the profile."
                ) from exc

    @property
    def spark(self) -> "SparkSession":
        if self._spark is None:
            raise EngineError("The embedded engine is not running (it was stopped or never started).")
        return self._spark

    @property
    def address(self) -> str:
        if isinstance(self._server, IsolatedServer):
            return f"{self._server.socket_path} (its own network's 127.0.0.1:{self.port})"
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        spark, self._spark = self._spark, None
        server, self._server = self._server, None
        if spark is not None:
            stop_connect_session(spark)
        if server is not None:
            try:
                server.stop()
            except RuntimeError:  # it already stopped (crashed): nothing left to stop
                pass

    def read_moved_on(self, error: Exception) -> bool:
        return _CHECKPOINT_PASSED_VERSION in str(error)

    def explain_failure(self, error: Exception) -> str:
        message = str(error).strip()
        if (
            any(sign in message for sign in ("UNAVAILABLE", "RETRIES_EXCEEDED"))
            or "failed to connect" in message.lower()
        ):
            return (
                f"The embedded engine at {self.address} stopped responding ({message.splitlines()[0]}). "
                "Its server runs inside this process; rerun the command. If it keeps happening, "
                "check memory and the `warehouse` directory's disk space."
            )
        if _WINDOW_ORDER_GAP in message:
            return (
                f"{message}\nThe embedded engine (Sail 0.7) cannot plan a window ordered by another "
                "window's column over a single row, such as a global aggregate's "
                '(docs/ARCHITECTURE.md, "Engines"). Put a filter between the aggregate and the '
                "windows, compute the inner window in a model of its own, or run on Spark "
                "(method: session)."
            )
        return message

    # -- statements ------------------------------------------------------------------------------

    def _table_name(self, relation: str) -> str:
        return canonical_names(relation, self._names)

    def _run(self, statement: str) -> "DataFrame":
        ddl = parse_ddl(statement)
        if ddl is None:
            return self.spark.sql(canonical_names(statement, self._names))
        lowered = lowered_names(statement, ddl)
        if lowered != statement:
            statement, ddl = lowered, parse_ddl(lowered) or ddl
        with self._ddl_lock:
            self._names.update(part.name.lower() for table in ddl.find_all(exp.Table) for part in table.parts)
            if isinstance(ddl, exp.Drop):
                return self._drop(statement, ddl)
            return self._create(statement, ddl)

    def _arrow(self, query: str) -> "pa.Table":
        # One request, not three (docs/ARCHITECTURE.md, "Applying"): the rows get the types
        # toArrow() gives them from the schema the request returns.
        from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame
        from pyspark.sql.pandas.types import to_arrow_schema

        frame = self._query(query)
        assert isinstance(frame, ConnectDataFrame)
        rows, schema = frame._to_table()
        if schema is None:
            return rows
        return rows.cast(to_arrow_schema(schema, error_on_duplicated_field_names_in_struct=True))

    def _query(self, query: str) -> "DataFrame":
        # Built here: Spark Connect's sql() would send the query once to be planned, then again
        # with the write or fetch that runs it (docs/ARCHITECTURE.md, "Cost of a refresh").
        from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame
        from pyspark.sql.connect.plan import SQL
        from pyspark.sql.connect.session import SparkSession as ConnectSession

        session = self.spark
        assert isinstance(session, ConnectSession), "the embedded engine's session is Spark Connect's"
        return ConnectDataFrame(SQL(canonical_names(query, self._names)), session)

    def _schema_of(self, table: exp.Table) -> str:
        return table.db or self.spark.catalog.currentDatabase()

    def _create(self, statement: str, create: exp.Create) -> "DataFrame":
        kind = (create.args.get("kind") or "").upper()
        properties = create.args.get("properties")
        temporary = bool(properties and properties.find(exp.TemporaryProperty))
        if kind in ("SCHEMA", "DATABASE"):
            result = self.spark.sql(statement)
            self.warehouse.create_schema(create.this.db or create.this.name)
            return result
        if kind == "VIEW" and not temporary:
            result = self.spark.sql(statement)
            table = create.this if isinstance(create.this, exp.Table) else create.this.this
            self.warehouse.save_view(self._schema_of(table), table.name, statement)
            self._view_names.get(self._schema_of(table).lower(), set()).add(table.name.lower())
            return result
        if kind != "TABLE" or temporary:
            return self.spark.sql(statement)
        return self._create_table(statement, create)

    def _create_table(self, statement: str, create: exp.Create) -> "DataFrame":
        table = create.this if isinstance(create.this, exp.Table) else create.this.this
        stored = create.find(exp.FileFormatProperty)
        if stored is not None and stored.name.lower() != "delta":
            raise EngineGap(
                f"Table {table.sql(dialect=DIALECT)} would be stored as {stored.name}: the embedded "
                "engine keeps Delta tables only (another format would be gone in the next process, "
                "and dynamic tables read Delta). Set `file_format: delta` for it (`+file_format: "
                "delta` for models, seeds and snapshots in dbt_project.yml), or remove `file_format`."
            )
        schema = self._schema_of(table)
        located = create.find(exp.LocationProperty)
        location = located.this.name if located else self.warehouse.table_location(schema, table.name)
        if not located:
            create = create.copy()
            props = create.args.get("properties") or exp.Properties(expressions=[])
            props.append("expressions", exp.LocationProperty(this=exp.Literal.string(str(location))))
            create.set("properties", props)
            statement = create.sql(dialect=DIALECT)
        query = create.expression
        is_new = not self._has_log(location)
        replace = query is not None and not is_new and bool(create.args.get("replace"))
        if replace and self._replaces_schema(create, location, query):
            return self._replace_schema(create, schema, table, location, query)
        if query is None or not is_new:
            return self._register_again(statement, schema, table.name, location)
        # CTAS of a new table: create it empty with nullable columns, then fill it. If filling
        # fails, remove it again so no half-created table is left.
        fields = self._schema(query).fields
        if any(f.dataType.typeName() == "void" for f in fields):
            return self.spark.sql(statement)  # Delta rejects untyped NULL columns; let it say so
        shell = create.copy()
        shell.set("expression", None)
        shell.set("replace", False)
        shell.set(
            "this",
            exp.Schema(
                this=table.copy(),
                expressions=[
                    exp.ColumnDef(
                        this=exp.to_identifier(f.name, quoted=True),
                        kind=exp.DataType.build(f.dataType.simpleString(), dialect=DIALECT),
                    )
                    for f in fields
                ],
            ),
        )
        self.spark.sql(shell.sql(dialect=DIALECT))
        # INSERT, not CREATE OR REPLACE ... AS SELECT: the latter re-registers the table in the
        # session's catalog with the query's NOT NULL columns, and inserting a NULL then fails.
        # The query goes in a subquery: Sail rejects `WITH ... INSERT`, and the columns keep
        # their order for the positional insert.
        fill = (
            f"INSERT INTO {table.sql(dialect='spark')} "
            f"SELECT * FROM ({query.sql(dialect='spark')}) AS ctas_query"
        )
        try:
            return self.spark.sql(fill)
        except Exception:
            self._drop_quietly(schema, table.name, location)
            raise

    def _has_log(self, location: str) -> bool:
        """Whether a Delta log is at ``location`` (a local folder, or one with a commit in an
        object store, where there are no folders)."""
        if not storage.is_url(location):
            return os.path.isdir(f"{location}/_delta_log")
        return storage.is_delta_table(location)

    def _register_again(self, statement: str, schema: str, name: str, location: str) -> "DataFrame":
        """Run ``statement`` as written, then register its table as every persisted table is,
        reading its schema from the Delta log: Sail registers the columns the statement declares
        (or, for CTAS over an existing table, the query's NOT NULL ones), and a NULL inserted or a
        column another writer changes would fail. Sail's DROP TABLE leaves the files."""
        result = self.spark.sql(statement)
        if self._has_log(location):
            self._register_from_log(schema, name, location)
        return result

    def _register_from_log(self, schema: str, name: str, location: str) -> "DataFrame":
        """Register the table afresh with the columns its Delta log holds (a catalog-only drop
        first: Sail's DROP TABLE leaves the files)."""
        self.spark.sql(f"DROP TABLE IF EXISTS {quote(schema)}.{quote(name)}")
        return self.spark.sql(PersistedTable(schema, name, location).create_statement())

    def _replaces_schema(self, create: exp.Create, location: str, query: exp.Expression) -> bool:
        """Whether ``CREATE OR REPLACE ... AS query`` changes the Delta table's columns (names,
        order, types) or partitioning: Sail's CTAS over an existing table keeps its schema, casting
        the query's rows to it, where Delta's replaces it (docs/ARCHITECTURE.md, "Engines")."""
        log = DeltaLog(str(location))
        current = [(f.name, f.dataType.simpleString()) for f in log.schema_at(log.latest_version()).fields]
        fields = self._schema(query).fields
        return [(f.name, f.dataType.simpleString()) for f in fields] != current or _partitioning(
            create
        ) != list(log.partition_columns)

    def _replace_schema(
        self, create: exp.Create, schema: str, table: exp.Table, location: str, query: exp.Expression
    ) -> "DataFrame":
        """``CREATE OR REPLACE ... AS query`` of an existing table whose schema or partitioning
        changes, as Delta does it: the query written over the table with ``overwriteSchema`` (one
        commit, its history kept), then the NOT NULL Sail's writer keeps from the query's plan
        dropped, as Spark's CTAS would not set it (metadata-only commits: no rows change). That
        writer moves partition columns last, so a partitioned table is re-created instead, in the
        query's column order: its history restarts, which every reader takes as a rebuild."""
        if _partitioning(create):
            self._drop_quietly(schema, table.name, location)
            return self._create_table(create.sql(dialect=DIALECT), create)
        rows = self.spark.sql(query.sql(dialect=DIALECT))
        rows.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(str(location))
        written = storage.delta_table(location)
        for field in written.schema().fields:
            if not field.nullable:
                written.alter.drop_column_not_null(field.name)
        # The session's catalog still lists the old columns.
        return self._register_from_log(schema, table.name, location)

    def schema_of(self, query: str) -> "StructType":
        self.statements_run += 1
        return self._schema(canonical_names(query, self._names))

    def _schema(self, query: Union[str, exp.Expression]) -> "StructType":
        """The columns ``query`` returns, as Sail analyses it, after refusing a set operation
        Sail would run into wrong values (:func:`_set_operation_gap`)."""
        sql = query if isinstance(query, str) else query.sql(dialect=DIALECT)
        schema = self.spark.sql(sql).schema
        if isinstance(query, str) and not _SET_OPERATION.search(query):
            return schema
        try:
            parsed = sqlglot.parse_one(query, read=DIALECT) if isinstance(query, str) else query
        except sqlglot.errors.ParseError:
            return schema
        gap = _set_operation_gap(self.spark, parsed)
        if gap is not None:
            raise EngineGap(gap)
        return schema

    def _drop_quietly(self, schema: str, name: str, location: str) -> None:
        try:
            self.spark.sql(f"DROP TABLE IF EXISTS {quote(schema)}.{quote(name)}")
        finally:
            self.warehouse.drop_table(location)

    def _drop(self, statement: str, drop: exp.Drop) -> "DataFrame":
        kind = (drop.args.get("kind") or "").upper()
        targets = drop.args.get("tables") or []
        if len(targets) != 1:
            return self.spark.sql(statement)
        target = targets[0]
        if kind in ("SCHEMA", "DATABASE"):
            result = self.spark.sql(statement)
            self.warehouse.drop_schema(target.db or target.name)
            return result
        schema = self._schema_of(target)
        if kind == "VIEW":
            result = self.spark.sql(statement)
            self.warehouse.drop_view(schema, target.name)
            self._view_names.get(schema.lower(), set()).discard(target.name.lower())
            return result
        if kind == "TABLE":
            location = self.table_location(schema, target.name)
            result = self.spark.sql(statement)
            if location is not None:
                self.warehouse.drop_table(location)
            return result
        return self.spark.sql(statement)

    def table_location(self, schema: str, name: str) -> Optional[str]:
        path = self.warehouse.table_location(schema, name)
        if self._has_log(path):
            return path
        return super().table_location(schema, name)  # created elsewhere with an explicit LOCATION

    def delta_log(
        self, name: str, *, hold_listing: bool = False, since: Optional[int] = None
    ) -> Optional[DeltaLog]:
        """As :meth:`Engine.delta_log`; in an object store, the warehouse's location is tried
        first with the log's own listing, so that finding the table costs no request of its own."""
        if self.warehouse.remote:
            schema, table = name.split(".", 1)
            log = DeltaLog(self.warehouse.table_location(schema, table), since=since)
            if hold_listing:
                log.hold_listing()
            if log.exists():
                return log
        return super().delta_log(name, hold_listing=hold_listing, since=since)

    def forget_catalog(self) -> None:
        super().forget_catalog()
        self._view_names = {}

    def view_definition(self, schema: str, name: str) -> Optional[str]:
        if self.warehouse.remote:
            # In an object store each look costs a request: a schema's saved views are listed
            # once per batch, and only a name listed is read (docs/ARCHITECTURE.md, "Object storage").
            listed = self._view_names
            if schema.lower() not in listed:
                listed[schema.lower()] = self.warehouse.view_names(schema)
            if name.lower() not in listed[schema.lower()]:
                return None
        statement = self.warehouse.view_statement(schema, name)
        if statement is None:
            return None
        create = sqlglot.parse_one(statement, read=DIALECT)
        return create.expression.sql(dialect=DIALECT) if create.expression else None


def _partitioning(create: exp.Create) -> List[str]:
    """The partition columns a CREATE TABLE statement declares."""
    declared = create.find(exp.PartitionedByProperty)
    if declared is None:
        return []
    columns = declared.this.expressions if isinstance(declared.this, exp.Schema) else [declared.this]
    return [column.name for column in columns]


def _set_operation_gap(spark: "SparkSession", parsed: exp.Expr) -> Optional[str]:
    """Why Sail would run a set operation of ``parsed`` into wrong values, or None.

    Sail 0.7 types a set operation's column as its first branch's, and casts the other branches'
    values to that type as it writes them; Spark widens the column instead (a bigint UNION ALL a
    string is a string). Where a later branch's type fits in the first's (an int after a bigint,
    anything after a string) the values are Spark's; where it does not they may change without
    a word: strings that are no numbers or dates become NULL, a double after a bigint is
    truncated, a wider decimal rounded (docs/ARCHITECTURE.md, "Engines"). A string literal whose
    value survives the cast is let through (dbt's fixtures write dates so), and integers that
    overflow fail loudly in Sail's cast. A bare NULL takes any type."""
    ctes = parsed.args.get("with")
    for operation in parsed.find_all(exp.SetOperation):
        sides = []
        for branch in (operation.left, operation.right):
            probe = exp.select("*").from_(branch.copy().subquery("branch"))
            if ctes is not None:
                probe.set("with", ctes.copy())
            try:
                sides.append(spark.sql(probe.sql(dialect=DIALECT)).schema.fields)
            except Exception:  # noqa: BLE001 - a branch that cannot stand alone: not checked
                break
        else:
            later = operation.right.selects if isinstance(operation.right, exp.Select) else []
            for index, (first, other) in enumerate(zip(*sides)):
                if _fits(other.dataType, first.dataType):
                    continue
                value = later[index].unalias() if index < len(later) else None
                if isinstance(value, exp.Literal) and value.is_string and _survives(spark, value, first):
                    continue
                types = (first.dataType.simpleString(), other.dataType.simpleString())
                wanted = next((t for t in ("string", "double") if t in types), types[1])
                return (
                    f"The branches of a {operation.key.upper()} give column {first.name} two types, "
                    f"{types[0]} and {types[1]}, which the embedded engine (Sail) cannot combine: it "
                    "would store wrong values. Cast the column to one type in every branch, e.g. "
                    f"cast({first.name} as {wanted}) as {first.name}."
                )
    return None


def _fits(other: "DataType", first: "DataType") -> bool:
    """Whether every value of type ``other`` is kept by a cast to ``first``."""
    from pyspark.sql import types as t

    integral = (t.ByteType, t.ShortType, t.IntegerType, t.LongType)
    if other == first or isinstance(other, t.NullType) or isinstance(first, t.StringType):
        return True
    if isinstance(other, integral) and isinstance(first, integral):
        return True  # an overflow fails Sail's cast: loud, never silent
    if isinstance(other, (t.ByteType, t.ShortType, t.IntegerType, t.FloatType)):
        return isinstance(first, t.DoubleType)
    if isinstance(other, t.DecimalType) and isinstance(first, t.DecimalType):
        return first.scale >= other.scale and first.precision - first.scale >= other.precision - other.scale
    return isinstance(other, t.DateType) and isinstance(first, t.TimestampType)


def _survives(spark: "SparkSession", literal: exp.Literal, column: "StructField") -> bool:
    """Whether the string ``literal`` cast to ``column``'s type reads back as itself."""
    text = literal.sql(dialect=DIALECT)
    typed = f"CAST({text} AS {column.dataType.simpleString()})"
    row = spark.sql(f"SELECT CAST({typed} AS STRING) = {text} AS same").collect()[0]
    return bool(row["same"])
