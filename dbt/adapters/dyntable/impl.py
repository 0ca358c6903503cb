"""The dyntable adapter: dbt-spark's adapter plus dynamic tables."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Union

from dbt.adapters.base import BaseRelation, available
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.spark.impl import SparkAdapter, SparkConfig
from dbt_common.exceptions import CompilationError, DbtRuntimeError

from dbt.adapters.dyntable.connections import DyntableConnectionManager, EngineRegistry

if TYPE_CHECKING:
    from datetime import datetime

    import agate

    from dbt.adapters.dyntable.dynamic_table.refresh import DynamicTable
    from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService

logger = AdapterLogger("dyntable")

#: `Provider: DELTA` as Sail writes it; dbt-spark looks for `Provider: delta`.
_PROVIDER_LINE = re.compile(r"^(Provider: )(\S+)$", re.MULTILINE)


@dataclass
class DyntableConfig(SparkConfig):
    """Model configs the adapter understands, dynamic-table keys included (see README)."""

    target_lag: Optional[str] = None
    refresh_mode: Optional[str] = None
    initialize: Optional[str] = None
    on_configuration_change: Optional[str] = None
    unique_key: Optional[Union[str, List[str]]] = None
    deterministic_functions: Optional[Union[str, List[str]]] = None


class DyntableAdapter(SparkAdapter):
    ConnectionManager = DyntableConnectionManager  # type: ignore[assignment]
    AdapterSpecificConfigs = DyntableConfig  # type: ignore[assignment]

    def __init__(self, config: Any, mp_context: Any) -> None:
        super().__init__(config, mp_context)
        # A relative `warehouse` is relative to the dbt project, wherever dbt was started from.
        project_root = getattr(config, "project_root", None)
        if project_root:
            EngineRegistry.project_root = Path(project_root)

    @classmethod
    def type(cls) -> str:
        return "dyntable"

    def _get_relation_information(self, row: "agate.Row") -> Any:
        """`SHOW TABLE EXTENDED` information with the provider lower-cased.

        Table formats are case-insensitive names; Sail reports `DELTA` where Spark says `delta`,
        and dbt-spark's case-sensitive check then took Delta tables for another format (snapshots
        refused to run on them; table models were dropped instead of replaced, losing history).
        """
        schema, name, information = super()._get_relation_information(row)
        information = _PROVIDER_LINE.sub(lambda m: m.group(1) + m.group(2).lower(), information or "")
        return schema, name, information

    def list_relations_without_caching(self, schema_relation: BaseRelation) -> List[BaseRelation]:
        """The schema's tables and views, without the session's temporary views.

        `SHOW TABLE EXTENDED IN <schema>` also lists every temporary view of the session (with no
        schema). The engine's session outlives one dbt command in this process, so the temporary
        views of earlier runs (incremental `__dbt_tmp` views) were listed as relations without a
        schema and broke `dbt docs generate` ("'NoneType' object has no attribute 'lower'").
        """
        relations = super().list_relations_without_caching(schema_relation)
        return [relation for relation in relations if relation.schema]

    # -- dynamic tables --------------------------------------------------------------------------

    def _dynamic_tables(self) -> "DynamicTableService":
        from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService

        connection = self.connections.get_thread_connection()
        creds = connection.credentials
        engine = self.connections.engine_for(connection)
        key = (id(engine), creds.metadata_schema)
        service = _SERVICES.get(key)
        if service is None:
            warehouse = EngineRegistry.warehouse_of(creds)
            service = _SERVICES[key] = DynamicTableService(engine, warehouse, creds.metadata_schema)
        return service

    def _get_columns_for_catalog(self, relation: BaseRelation) -> Iterable[Dict[str, Any]]:
        """dbt-spark's catalog rows; a dynamic table's say so, with its lag, mode and freshness
        (shown by `dbt docs` beside the table's other details)."""
        details = self._dynamic_table_catalog_details(relation)
        for row in super()._get_columns_for_catalog(relation):
            row.update(details)
            yield row

    def _dynamic_table_catalog_details(self, relation: BaseRelation) -> Dict[str, Any]:
        from dbt.adapters.dyntable.dynamic_table.metadata import GRAPH_HISTORY, MetadataStore

        creds = self.config.credentials
        root = EngineRegistry.warehouse_of(creds) / creds.metadata_schema.lower()
        if not (root / GRAPH_HISTORY / "_delta_log").is_dir():
            return {}
        store = MetadataStore(root, creds.metadata_schema)
        name = f"{relation.schema}.{relation.identifier}".lower()
        graph = store.graph(name).get(name)
        if graph is None:
            return {}
        frontier = store.frontier(name)
        stats = {
            "target_lag": ("Target lag", graph["target_lag"], "How stale the table may get"),
            "refresh_mode": ("Refresh mode", graph["refresh_mode"], "auto, full or incremental"),
            "scheduling_state": ("Scheduling state", graph["scheduling_state"], "ACTIVE or SUSPENDED"),
            "data_timestamp": (
                "Data timestamp",
                frontier.data_timestamp.isoformat() if frontier else "not initialized",
                "The table equals its query as of this time",
            ),
        }
        details: Dict[str, Any] = {"table_type": "dynamic table"}
        for key, (label, value, description) in stats.items():
            details.update({
                f"stats:{key}:label": label,
                f"stats:{key}:value": value,
                f"stats:{key}:description": description,
                f"stats:{key}:include": True,
            })
        return details

    @available
    def validate_dynamic_table_config(self, model_name: str, config: Dict[str, Any]) -> str:
        """Raise a compiler error naming the model, key and accepted forms; return the lag."""
        from dbt.adapters.dyntable.dynamic_table.config import (
            DynamicTableConfig,
            DynamicTableConfigError,
        )

        try:
            return str(DynamicTableConfig.from_model(model_name, config).target_lag)
        except DynamicTableConfigError as exc:
            raise CompilationError(str(exc)) from None

    def _dynamic_table(
        self,
        relation: BaseRelation,
        sql: str,
        config: Dict[str, Any],
        model_name: str,
        graph: Optional[Mapping[str, Any]],
        model_id: Optional[str],
    ) -> "DynamicTable":
        from dbt.adapters.dyntable.dynamic_table.config import DynamicTableConfigError
        from dbt.adapters.dyntable.dynamic_table.declared_keys import declared_keys
        from dbt.adapters.dyntable.dynamic_table.service import dynamic_table_from_model

        keys = declared_keys(graph, model_id) if graph and model_id else {}
        try:
            return dynamic_table_from_model(
                relation.schema, relation.identifier, sql, config, model_name, keys
            )
        except DynamicTableConfigError as exc:
            raise CompilationError(str(exc)) from None

    @available
    def refresh_dynamic_table(
        self,
        relation: BaseRelation,
        sql: str,
        config: Dict[str, Any],
        full_refresh: bool,
        data_timestamp: "datetime",
        model_name: str,
        graph: Optional[Mapping[str, Any]] = None,
        model_id: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Refresh one dynamic table at the invocation's data timestamp (the materialization).
        ``graph`` (dbt's flat graph) and ``model_id`` give the unique keys the project declares."""
        dt = self._dynamic_table(relation, sql, config, model_name, graph, model_id)
        try:
            result = self._dynamic_tables().refresh(dt, data_timestamp, "DBT_RUN", full_refresh)
        except Exception as exc:  # noqa: BLE001 - one clear error per failed refresh
            raise DbtRuntimeError(f"Dynamic table {dt.name} (model {model_name}): {exc}") from exc
        for warning in result.warnings:
            logger.warning(warning)
        rows = result.rows_inserted + result.rows_deleted
        return {
            "action": result.action,
            "state": result.state,
            "reason": result.reason,
            "rows": rows,
            "message": f"{result.action or result.state} +{result.rows_inserted} -{result.rows_deleted}",
        }

    @available
    def explain_dynamic_table(
        self,
        relation: BaseRelation,
        sql: str,
        config: Dict[str, Any],
        model_name: str,
        graph: Optional[Mapping[str, Any]] = None,
        model_id: Optional[str] = None,
    ) -> str:
        """How the dynamic table refreshes: its plan, the rule at each node, its row key and the
        delta SQL, or why it refreshes FULL (``dyntable explain`` prints the same)."""
        dt = self._dynamic_table(relation, sql, config, model_name, graph, model_id)
        try:
            return self._dynamic_tables().refresher.explain(dt)
        except Exception as exc:  # noqa: BLE001 - one clear error naming the model
            raise DbtRuntimeError(f"Dynamic table {dt.name} (model {model_name}): {exc}") from exc


#: One dynamic-table service per engine and metadata schema, shared by dbt's threads.
_SERVICES: Dict[Any, "DynamicTableService"] = {}
