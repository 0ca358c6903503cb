"""A dynamic table's details in dbt's catalog, which `dbt docs` shows beside the table's other
details: its target lag, refresh mode, scheduling state and data timestamp."""

from __future__ import annotations

import threading
from typing import Any, Dict, Optional

from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.dynamic_table.metadata import GRAPH_HISTORY, MetadataDamaged, MetadataStore

logger = AdapterLogger("dyntable")

_catalog_stores: Dict[str, MetadataStore] = {}
_catalog_stores_lock = threading.Lock()


def _catalog_store(root: str, schema: str) -> Optional[MetadataStore]:
    """The metadata tables `dbt docs generate` reads each relation's details from, opened once
    per process (in an object store, each opening costs requests); None where they do not exist."""
    with _catalog_stores_lock:
        found = _catalog_stores.get(root)
        if found is None and storage.is_delta_table(f"{root}/{GRAPH_HISTORY}"):
            found = _catalog_stores[root] = MetadataStore(root, schema)
        return found


def dynamic_table_details(root: str, schema: str, name: str) -> Dict[str, Any]:
    """The catalog's fields for relation ``name``, a dynamic table by the metadata tables of
    ``schema`` at ``root``; none for another relation."""
    store = _catalog_store(root, schema)
    if store is None:
        return {}
    try:
        graph = store.graph(name).get(name)
        frontier = store.frontier(name)
    except MetadataDamaged as damaged:
        logger.warning(f"{name} is shown without its dynamic table details. {damaged}")
        return {}
    if graph is None:
        return {}
    stats = {
        "target_lag": ("Target lag", graph.target_lag, "How stale the table may get"),
        "refresh_mode": ("Refresh mode", graph.refresh_mode, "auto, full or incremental"),
        "scheduling_state": ("Scheduling state", str(graph.scheduling_state), "ACTIVE or SUSPENDED"),
        "data_timestamp": (
            "Data timestamp",
            frontier.data_timestamp.isoformat() if frontier else "not initialized",
            "The table equals its query as of this time",
        ),
    }
    details: Dict[str, Any] = {"table_type": "dynamic table"}
    for key, (label, value, description) in stats.items():
        details.update(
            {
                f"stats:{key}:label": label,
                f"stats:{key}:value": value,
                f"stats:{key}:description": description,
                f"stats:{key}:include": True,
            }
        )
    return details
