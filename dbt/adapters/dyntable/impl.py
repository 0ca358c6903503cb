"""The dyntable adapter: dbt-spark's adapter plus dynamic tables."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, List, Optional, Union

from dbt.adapters.spark.impl import SparkAdapter, SparkConfig

from dbt.adapters.dyntable.connections import DyntableConnectionManager, EngineRegistry

if TYPE_CHECKING:
    import agate

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
