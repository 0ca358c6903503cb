"""Engines the adapter can run on; :func:`start_engine` picks one from the profile's ``method``."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, Mapping, Optional, Union

from dbt.adapters.dyntable.engines.base import Capabilities, Engine, EngineError
from dbt.adapters.dyntable.storage import Storage

#: A warehouse as an engine takes it: a local folder, or a storage (an object store's, with its options).
Warehouses = Union[Path, str, Storage]

__all__ = ["Capabilities", "Engine", "EngineError", "METHODS", "start_engine"]


def _embedded(warehouse: Warehouses, port: int, spark_conf: Mapping[str, str], **_: object) -> Engine:
    from dbt.adapters.dyntable.engines.embedded import EmbeddedEngine

    return EmbeddedEngine(warehouse, port=port, conf=spark_conf).start()


def _session(
    warehouse: Warehouses, master: str, spark_jars: Optional[Path], spark_conf: Mapping[str, str], **_: object
) -> Engine:
    from dbt.adapters.dyntable.engines.jvm import JvmSparkEngine

    return JvmSparkEngine(warehouse, master=master, spark_jars=spark_jars, spark_conf=spark_conf).start()


def _connect(connect_url: Optional[str], **_: object) -> Engine:
    from dbt.adapters.dyntable.engines.connect import ConnectEngine

    if not connect_url:
        raise EngineError("`method: connect` needs `connect_url` (for example sc://127.0.0.1:15002).")
    return ConnectEngine(connect_url).start()


#: Profile `method` -> how to start it. Engine modules load lazily: the JVM one is heavy.
METHODS: Dict[str, Callable[..., Engine]] = {
    "embedded": _embedded,
    "session": _session,
    "connect": _connect,
}


def start_engine(
    method: str,
    *,
    warehouse: Warehouses,
    port: int = 0,
    master: str = "local[*]",
    spark_jars: Optional[Path] = None,
    spark_conf: Optional[Mapping[str, str]] = None,
    connect_url: Optional[str] = None,
) -> Engine:
    """Start the engine a profile's `method` names, with that profile's settings."""
    starter = METHODS.get(method)
    if starter is None:
        raise EngineError(f"Unknown `method` {method!r}; use one of: {', '.join(repr(m) for m in METHODS)}.")
    return starter(
        warehouse=warehouse if isinstance(warehouse, Storage) else Path(warehouse),
        port=port,
        master=master,
        spark_jars=Path(spark_jars) if spark_jars is not None else None,
        spark_conf=dict(spark_conf or {}),
        connect_url=connect_url,
    )
