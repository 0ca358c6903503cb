"""The semantics contract as a test assertion, on the engine of the running dbt project."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

from dbt.adapters.dyntable.dynamic_table.metadata import Frontier, MetadataStore
from dbt.adapters.dyntable.dynamic_table.verify import check_dvs


def metadata(warehouse: Path, schema: str = "dyntable_meta") -> MetadataStore:
    return MetadataStore(warehouse / schema, schema)


def project_engine(project: Any):
    adapter = project.adapter
    with adapter.connection_named("dvs_check"):
        return adapter.connections.environment(adapter.connections.get_thread_connection()).engine


def assert_dvs(project: Any, warehouse: Path, model: str, metadata_schema: str = "dyntable_meta") -> Frontier:
    """DT ``model`` equals its query at its recorded data timestamp, as a multiset."""
    engine = project_engine(project)
    store = metadata(warehouse, metadata_schema)
    check = check_dvs(engine, store, f"{project.test_schema}.{model}".lower())
    assert check.ok, f"{check.name}: {check.detail}"
    assert check.frontier is not None
    return check.frontier


def history(warehouse: Path, name: str) -> List[Dict[str, Any]]:
    return metadata(warehouse).history(name.lower())
