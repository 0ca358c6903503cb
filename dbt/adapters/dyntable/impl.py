"""The dyntable adapter: dbt-spark's adapter plus dynamic tables."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union, List

from dbt.adapters.spark.impl import SparkAdapter, SparkConfig

from dbt.adapters.dyntable.connections import DyntableConnectionManager, EngineRegistry


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
