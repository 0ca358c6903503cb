"""The embedded engine: LakeSail's Sail started by this process, Delta tables in its warehouse.

Sail is a Rust Spark Connect server; PySpark connects to it with one pinned session id
(:mod:`.embedded_launch` starts both). Sail's catalog lives in that session's memory only, so the
engine persists every table at an explicit location under the warehouse and every view's
statement beside it, and re-attaches both when it starts (see :mod:`.warehouse`). Statements that
Sail runs differently from Spark are adapted by the engine and nowhere else: DDL by
:mod:`.embedded_ddl`, set operations Sail would type wrongly refused by
:mod:`.embedded_set_operations`, and schema, table and view names lowered here, as Spark's catalog
resolves them case-insensitively and Sail's only as spelled.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Dict, Mapping, Optional, Set, Union

import sqlglot
from sqlglot import exp

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.delta_log import DeltaLog
from dbt.adapters.dyntable.engines import embedded_launch
from dbt.adapters.dyntable.engines.base import Capabilities, Engine, EngineError, stop_connect_session
from dbt.adapters.dyntable.engines.embedded_ddl import EmbeddedDdl, has_delta_log
from dbt.adapters.dyntable.engines.embedded_launch import LocalServer, Server
from dbt.adapters.dyntable.engines.embedded_set_operations import checked_schema
from dbt.adapters.dyntable.engines.isolated import IsolatedServer
from dbt.adapters.dyntable.engines.warehouse import (
    AttachReport,
    Warehouse,
    canonical_names,
    lowered_names,
    parse_ddl,
)
from dbt.adapters.dyntable.vocabulary import DIALECT

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

logger = logging.getLogger(__name__)


#: How Sail 0.7 fails to plan a window ordered by another window's column over one row
#: (docs/ARCHITECTURE.md, "Engines").
_WINDOW_ORDER_GAP = "does not satisfy order requirements"

#: How Sail 0.7 fails to read a Delta version behind a checkpoint written after the refresh
#: decided to read it with ``VERSION AS OF`` (docs/ARCHITECTURE.md, "Engines").
_CHECKPOINT_PASSED_VERSION = "Missing commit file: expected version"


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
        merge_condition_recorded=True,
        refolds_small_tables=True,
        escaped_table_paths=False,
        deletion_vectors=True,
        files_per_scan=100,
        grouping_cost=4.0,
    )

    def __init__(
        self,
        warehouse: Union[str, Path, storage.Storage],
        port: int = 0,
        conf: Optional[Mapping[str, str]] = None,
    ) -> None:
        self.warehouse = Warehouse(warehouse)
        self.port = port
        self.conf = dict(conf or {})
        self._server: Optional[Server] = None
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
        embedded_launch.check_port(self.port)
        embedded_launch.prepare_environment()
        self._apply_object_store_environment()
        server = embedded_launch.start_server(self.port, self.warehouse.remote)
        self._server, self.port = server, server.port
        try:
            self._spark = embedded_launch.open_session(server, str(self.warehouse.root), self.conf)
            report = self.warehouse.attach(self._spark)
            self._names = self.warehouse.names()
        except Exception:
            self.stop()
            raise
        self._log_attached(report)
        if isinstance(server, LocalServer):
            server.started()
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
            statements = EmbeddedDdl(self.spark, self.warehouse, self._view_names, self.table_location)
            if isinstance(ddl, exp.Drop):
                return statements.drop(statement, ddl)
            return statements.create(statement, ddl)

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

    def schema_of(self, query: str) -> "StructType":
        self.statements_run += 1
        return checked_schema(self.spark, canonical_names(query, self._names))

    def table_location(self, schema: str, name: str) -> Optional[str]:
        path = self.warehouse.table_location(schema, name)
        if has_delta_log(path):
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
