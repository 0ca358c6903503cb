"""The dyntable adapter: dbt-spark's adapter plus dynamic tables."""

from __future__ import annotations

import re
import threading
import traceback
from datetime import datetime
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional

from dbt.adapters.base.meta import available
from dbt.adapters.base.relation import BaseRelation
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.spark.column import SparkColumn
from dbt.adapters.spark.impl import SparkAdapter
from dbt.flags import get_flags
from dbt_common.exceptions import CompilationError, DbtRuntimeError
from dbt_common.invocation import get_invocation_started_at

from dbt.adapters.dyntable.catalog_details import dynamic_table_details
from dbt.adapters.dyntable.changes import VersionedRelations
from dbt.adapters.dyntable.connections import SPARK_METHODS, DyntableConnectionManager, warehouse_of
from dbt.adapters.dyntable.dynamic_table.config import VERIFY_MODES, DynamicTableConfigError
from dbt.adapters.dyntable.dynamic_table.declared_keys import node_relation_name
from dbt.adapters.dyntable.dynamic_table.lifecycle import RefreshRequest, Trigger
from dbt.adapters.dyntable.dynamic_table.metadata import MetadataDamaged
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable, built_tables
from dbt.adapters.dyntable.dynamic_table.refresh import RefreshFailed
from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService
from dbt.adapters.dyntable.dynamic_table.snapshot import NoCommonSnapshot, common_snapshot
from dbt.adapters.dyntable.dynamic_table.table_features import grants_refusal, lacks
from dbt.adapters.dyntable.invocation import ParsedProjectFreeze, compile_ahead
from dbt.adapters.dyntable.vocabulary import DYNAMIC_TABLE, quoted_table, relation_name, sql_string

if TYPE_CHECKING:
    import agate

    from dbt.adapters.dyntable.delta_log import DeltaLog

logger = AdapterLogger("dyntable")

#: `Provider: DELTA` as Sail writes it; dbt-spark looks for `Provider: delta`.
_PROVIDER_LINE = re.compile(r"^(Provider: )(\S+)$", re.MULTILINE)
#: A top-level column of the `Schema:` tree JVM Spark prints for a view, whose integral types
#: carry Spark's internal names (`long`) where DESCRIBE and Sail say `bigint`.
_SCHEMA_TREE_COLUMN = re.compile(r"^( \|-- .*: )(long|integer|short|byte)( \(nullable = )", re.MULTILINE)
_SQL_TYPE_NAMES = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint"}


def _is_dynamic_table(node: Any) -> bool:
    return getattr(getattr(node, "config", None), "materialized", None) == DYNAMIC_TABLE


class DyntableAdapter(SparkAdapter):
    ConnectionManager = DyntableConnectionManager
    connections: DyntableConnectionManager

    def __init__(self, config: Any, mp_context: Any) -> None:
        super().__init__(config, mp_context)
        self._batch_lock = threading.Lock()
        self._batched: List[DynamicTableService] = []
        #: Relations pinned to versions for consistent reads, kept until the invocation ends.
        self._versioned: Optional[VersionedRelations] = None
        self._parsed_project = ParsedProjectFreeze()

    @classmethod
    def type(cls) -> str:
        return "dyntable"

    def pre_model_hook(self, config: Any) -> Any:
        """A model, seed or snapshot without `file_format` is built as `file_format: delta`.

        Both engines store it as Delta anyway (`spark.sql.sources.default`), but dbt-spark's
        materializations read the config: without it a `table` model was dropped and created
        again at every run, so every dynamic table reading it rebuilt (a new table, its history
        gone), and an incremental model could not `merge` (docs/ARCHITECTURE.md, "Rewritten
        inputs"). A format set by the project is left as it is.
        """
        node_config = getattr(getattr(config, "model", None), "config", None)
        if node_config is not None and node_config.get("file_format") is None:
            node_config["file_format"] = "delta"
        return super().pre_model_hook(config)

    def _get_relation_information(self, row: "agate.Row") -> Any:
        """`SHOW TABLE EXTENDED` information with the provider lower-cased and SQL type names.

        Table formats are case-insensitive names; Sail reports `DELTA` where Spark says `delta`,
        and dbt-spark's case-sensitive check then took Delta tables for another format (snapshots
        refused to run on them; table models were dropped instead of replaced, losing history).
        """
        schema, name, information = super()._get_relation_information(row)
        return schema, name, _spark_information(information or "")

    def get_columns_in_relation(self, relation: BaseRelation) -> List[SparkColumn]:
        """dbt-spark's columns, or, where the catalog lists none for a Delta table (the embedded
        engine attaches tables with array, map or partition columns without a column list), the
        columns of its Delta log."""
        columns: List[SparkColumn] = super().get_columns_in_relation(relation)
        if columns or self.config.credentials.method in SPARK_METHODS or not relation.identifier:
            return columns
        engine = self.connections.environment(self.connections.get_thread_connection()).engine
        log = engine.delta_log(relation_name(relation.schema, relation.identifier))
        return columns if log is None else _log_columns(relation, log)

    def list_relations_without_caching(self, schema_relation: BaseRelation) -> List[BaseRelation]:
        """The schema's tables and views, without the session's temporary views.

        `SHOW TABLE EXTENDED IN <schema>` also lists every temporary view of the session (with no
        schema). The engine's session outlives one dbt command in this process, so the temporary
        views of earlier runs (incremental `__dbt_tmp` views) were listed as relations without a
        schema and broke `dbt docs generate` ("'NoneType' object has no attribute 'lower'").
        """
        relations = super().list_relations_without_caching(schema_relation)
        return [relation for relation in relations if relation.schema]

    def set_macro_resolver(self, macro_resolver: Any) -> None:
        """dbt's parsed project, handed over before the engine starts: the first model's
        one-time compilation starts on a thread of its own (:func:`~.invocation.compile_ahead`)."""
        super().set_macro_resolver(macro_resolver)
        if any(_is_dynamic_table(node) for node in getattr(macro_resolver, "nodes", {}).values()):
            threading.Thread(
                target=compile_ahead,
                args=(macro_resolver, self.config.project_name, self.type()),
                name="dyntable-compile-ahead",
                daemon=True,
            ).start()

    def set_relations_cache(self, *args: Any, **kwargs: Any) -> None:
        """dbt's start of a run, before its first model compiles."""
        self._parsed_project.freeze()
        super().set_relations_cache(*args, **kwargs)

    # -- dynamic tables --------------------------------------------------------------------------

    def _service(self) -> DynamicTableService:
        """The dynamic-table service of this thread's connection (engine started on first use),
        its metadata batched until the end of the invocation (``cleanup_connections``)."""
        self._parsed_project.freeze()  # a run without cache population (--no-populate-cache)
        connection = self.connections.get_thread_connection()
        service = self.connections.environment(connection).service(connection.credentials)
        with self._batch_lock:
            if service not in self._batched:
                service.open_batch()
                self._batched.append(service)
        return service

    def cleanup_connections(self) -> None:
        """dbt's end of an invocation: write the history rows and NO_DATA frontiers its
        refreshes batched, then close the connections."""
        with self._batch_lock:
            batched, self._batched = self._batched, []
            versioned, self._versioned = self._versioned, None
        self._parsed_project.thaw()
        if versioned is not None:
            versioned.close()
        for service in batched:
            try:
                service.close_batch()
            except MetadataDamaged as damaged:
                # Each refresh that needed the table already failed with this message.
                logger.error(f"The refresh history of this run was not recorded. {damaged}")
        super().cleanup_connections()

    def _get_columns_for_catalog(self, relation: BaseRelation) -> Iterable[Dict[str, Any]]:
        """dbt-spark's catalog rows; a dynamic table's say so, with its lag, mode and freshness
        (shown by `dbt docs` beside the table's other details)."""
        creds = self.config.credentials
        root = f"{warehouse_of(creds, self.connections.project_root)}/{creds.metadata_schema.lower()}"
        name = relation_name(relation.schema, relation.identifier or "")
        details = dynamic_table_details(root, creds.metadata_schema, name)
        for row in super()._get_columns_for_catalog(relation):
            row.update(details)
            yield row

    @available.parse_none
    def dynamic_table(self, model: Any, graph: Optional[Mapping[str, Any]] = None) -> DynamicTable:
        """The dynamic table ``model`` (dbt's node) defines, with the unique keys ``graph`` (dbt's
        flat graph) declares; a bad config is a compiler error naming the model, the key and the
        accepted forms."""
        try:
            dt = DynamicTable.from_node(model, graph)
        except DynamicTableConfigError as exc:
            raise CompilationError(str(exc)) from None
        for warning in dt.config.warnings:
            logger.warning(warning)
        return dt

    @available.parse(
        lambda *args, **kwargs: {"action": None, "state": "", "reason": "", "rows": 0, "message": ""}
    )
    def refresh_dynamic_table(
        self,
        dt: DynamicTable,
        graph: Optional[Mapping[str, Any]] = None,
        selected_resources: Optional[Iterable[str]] = None,
    ) -> Dict[str, Any]:
        """Refresh ``dt`` at the invocation's data timestamp: the materialization. The tables the
        invocation builds (from dbt's ``graph`` and ``selected_resources``) are read at the
        version it produced."""
        request = _dbt_run_request(dt, graph, selected_resources)
        service: Optional[DynamicTableService] = None
        try:
            service = self._service()
            result = service.refresh(dt, request)
        except Exception as exc:  # noqa: BLE001 - one clear error per failed refresh
            if isinstance(exc, RefreshFailed):
                why = exc.message  # what its history row records
            else:  # it failed before it started: the engine, the lock, the metadata tables
                why = service.engine.failure_message(exc) if service is not None else str(exc)
            # dbt shows the message; its debug log keeps where it came from, for a bug report.
            logger.debug("".join(traceback.format_exception(exc)))
            raise DbtRuntimeError(dt.said(why)) from exc
        for warning in result.warnings:
            logger.warning(warning)
        if request.empty:
            logger.info(dt.said(result.reason))
        return {
            "action": str(result.action) if result.action else None,
            "state": str(result.state),
            "reason": result.reason,
            "rows": result.rows_inserted + result.rows_deleted,
            "message": result.summary,
        }

    @available.parse(lambda relations, *args, **kwargs: [str(r) for r in relations])
    def consistent_relations(self, relations: List[BaseRelation]) -> List[str]:
        """SQL reading each of ``relations`` (dynamic tables) at their latest common data timestamp:
        ``VERSION AS OF`` the version of each that holds it (docs/ARCHITECTURE.md, "Consistent
        reads"). The ``dyntable_consistent`` macro calls it."""
        service = self._service()
        names = [relation_name(r.schema, r.identifier or "") for r in relations]
        try:
            snapshot = common_snapshot(service.engine, service.metadata, names)
        except NoCommonSnapshot as exc:
            raise DbtRuntimeError(f"dyntable_consistent: {exc}") from None
        with self._batch_lock:
            if self._versioned is None:
                self._versioned = VersionedRelations(
                    service.engine.spark, service.engine.capabilities, outlives_session=True
                )
            versioned = self._versioned
        read = []
        for name in names:
            log = service.engine.delta_log(name)
            assert log is not None  # common_snapshot found its commit
            read.append(versioned.relation(quoted_table(name), log, snapshot.versions[name]))
        logger.info(f"dyntable_consistent: {', '.join(names)} as of {snapshot.data_timestamp.isoformat()}")
        return read

    @available.parse(lambda *args, **kwargs: "select 1 as mismatch where 1 = 0")
    def dynamic_table_test_sql(
        self, relation: BaseRelation, mode: str = "full", graph: Optional[Mapping[str, Any]] = None
    ) -> str:
        """The ``dynamic_table_matches_query`` test: SQL returning one row naming the mismatch
        when the dynamic table at ``relation`` does not equal its query at its data timestamp
        (docs/ARCHITECTURE.md, "Verifying"), none when it does."""
        if mode not in VERIFY_MODES:
            raise CompilationError(
                f"dynamic_table_matches_query on {relation}: mode {mode!r} is not one of "
                f"{', '.join(VERIFY_MODES)}."
            )
        name = relation_name(relation.schema, relation.identifier or "")
        node = _dynamic_table_node(graph, name)
        if node is None:
            raise CompilationError(
                f"dynamic_table_matches_query: {name} is not a dynamic table of this project "
                "(attach the test to a model with materialized='dynamic_table')."
            )
        dt = self.dynamic_table(node, graph)
        check = self._service().verify(dt, mode)
        if check.ok:
            return f"select {sql_string(check.detail)} as mismatch where 1 = 0"
        return f"select {sql_string(f'{dt.model}: {check.detail}')} as mismatch"

    @available.parse(lambda *args, **kwargs: False)
    def grants_apply(self, dt: DynamicTable) -> bool:
        """Whether dbt's ``grants`` can be applied to ``dt`` on this engine; when not, a warning
        naming the engine and the model says so (docs/ARCHITECTURE.md, "Table features")."""
        service = self._service()
        said = grants_refusal(service.engine, dt.relation)
        if said is None:
            return True
        logger.warning(
            f"Model '{dt.model}': its grants are not applied to dynamic table {dt.name}: "
            f"{lacks(service.engine, 'grants (SHOW GRANTS / GRANT)', said)}. Run it on an engine "
            "whose catalog has grants (JVM Spark with such a catalog) to apply them."
        )
        return False

    @available.parse(lambda *args, **kwargs: False)
    def seed_keeps_table(
        self, relation: Optional[BaseRelation], agate_table: "agate.Table", column_types: Mapping[str, str]
    ) -> bool:
        """Whether a seed reloads into the Delta table it is, its rows replaced, rather than into
        a table dropped and created again: the CSV's columns and types are the table's. Its
        history then continues, and the dynamic tables reading it see the rows that changed
        (docs/ARCHITECTURE.md, "Rewritten inputs")."""
        if relation is None or not getattr(relation, "is_delta", False):
            return False
        loaded = [
            (str(name).lower(), str(column_types.get(name) or self.convert_type(agate_table, index)).lower())
            for index, name in enumerate(agate_table.column_names)
        ]
        held = [
            (column.name.lower(), column.dtype.lower()) for column in self.get_columns_in_relation(relation)
        ]
        return loaded == held

    @available.parse(lambda *args, **kwargs: "")
    def explain_dynamic_table(self, dt: DynamicTable) -> str:
        """How ``dt`` refreshes: its plan, the rule at each node, its row key and the delta SQL,
        or why it refreshes FULL (``dyntable explain`` prints the same)."""
        try:
            return self._service().explain(dt)
        except Exception as exc:  # noqa: BLE001 - one clear error naming the model
            raise DbtRuntimeError(dt.said(exc)) from exc


def invocation_started_at() -> datetime:
    """The data timestamp of every dynamic table one dbt invocation refreshes: its start (UTC)."""
    return get_invocation_started_at()


def _dbt_run_request(
    dt: DynamicTable, graph: Optional[Mapping[str, Any]], selected_resources: Optional[Iterable[str]]
) -> RefreshRequest:
    """The refresh `dbt run` asks of ``dt``: at the invocation's start, from scratch as
    ``--full-refresh`` or the model's ``full_refresh`` says, reading the tables the invocation
    builds at the versions it produced; none at all under ``--empty``."""
    flags = get_flags()  # type: ignore[no-untyped-call]
    full_refresh = dt.config.full_refresh
    if full_refresh is None:
        full_refresh = bool(flags.FULL_REFRESH)  # should_full_refresh()
    built = built_tables(graph, selected_resources)
    empty = bool(getattr(flags, "EMPTY", False))  # dbt run/build --empty
    return RefreshRequest(invocation_started_at(), Trigger.DBT_RUN, full_refresh, built, empty)


def _dynamic_table_node(graph: Optional[Mapping[str, Any]], name: str) -> Optional[Mapping[str, Any]]:
    """The node of dbt's flat ``graph`` whose dynamic table is ``name``, if any."""
    return next(
        (
            n
            for n in (graph or {}).get("nodes", {}).values()
            if n.get("resource_type") == "model"
            and n.get("config", {}).get("materialized") == DYNAMIC_TABLE
            and node_relation_name(n) == name
        ),
        None,
    )


def _spark_information(information: str) -> str:
    """`SHOW TABLE EXTENDED` information as dbt-spark reads it from JVM Spark."""
    information = _PROVIDER_LINE.sub(lambda m: m.group(1) + m.group(2).lower(), information)
    # dbt-spark reads a view's column types from that tree: `dbt docs` showed a view's
    # bigint column as `long` on JVM Spark, and the same column of a table as `bigint`.
    return _SCHEMA_TREE_COLUMN.sub(
        lambda m: m.group(1) + _SQL_TYPE_NAMES[m.group(2)] + m.group(3), information
    )


def _log_columns(relation: BaseRelation, log: "DeltaLog") -> List[SparkColumn]:
    """The columns of ``relation``'s Delta log, as dbt-spark lists a relation's columns."""
    return [
        SparkColumn(
            table_database=None,
            table_schema=relation.schema,
            table_name=relation.name,
            table_type=relation.type,
            table_owner="",
            table_stats=None,
            column=field.name,
            column_index=index,
            dtype=field.dataType.simpleString(),
        )
        for index, field in enumerate(log.schema_at(log.latest_version()).fields)
    ]
