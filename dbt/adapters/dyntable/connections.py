"""Profile settings and connections.

`method: embedded` (the default), `session` and `connect` run statements through an
:class:`~dbt.adapters.dyntable.engines.base.Engine` that this process starts once and shares between
dbt's threads; `thrift`, `http` and `odbc` are dbt-spark's own connections, unchanged.
"""

from __future__ import annotations

import atexit
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from dbt.adapters.contracts.connection import Connection, ConnectionState
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.spark.connections import SparkConnectionManager, SparkCredentials
from dbt.adapters.spark.session import Connection as SessionConnection
from dbt.adapters.spark.session import Cursor as SessionCursor
from dbt.adapters.spark.session import SessionConnectionWrapper
from dbt_common.exceptions import DbtConfigError, DbtRuntimeError

from dbt.adapters.dyntable.engines.base import Engine, EngineError

logger = AdapterLogger("dyntable")

ENGINE_METHODS = ("embedded", "session", "connect")
SPARK_METHODS = ("thrift", "http", "odbc")
DEFAULT_WAREHOUSE = Path(".dyntable") / "warehouse"
DEFAULT_METADATA_SCHEMA = "dyntable_meta"


@dataclass
class DyntableCredentials(SparkCredentials):
    """dbt-spark's credentials plus the engines this plugin starts itself."""

    method: str = "embedded"  # type: ignore[assignment]
    host: Optional[str] = None
    schema: Optional[str] = None  # type: ignore[assignment]
    port: Optional[int] = None  # type: ignore[assignment]
    warehouse: Optional[str] = None
    master: str = "local[*]"
    spark_jars: Optional[str] = None
    metadata_schema: str = DEFAULT_METADATA_SCHEMA

    def __post_init__(self) -> None:
        if self.method not in ENGINE_METHODS + SPARK_METHODS:
            raise DbtConfigError(
                f"Unknown `method: {self.method}` in the dyntable profile. Use one of: "
                + ", ".join(ENGINE_METHODS + SPARK_METHODS)
                + " (omit it for the embedded engine)."
            )
        if self.method in SPARK_METHODS:
            self.port = 443 if self.port is None else self.port
            super().__post_init__()
            return
        if self.schema is None:
            raise DbtRuntimeError("Must specify `schema` in the dyntable profile")
        if self.database is not None and self.database != self.schema:
            raise DbtRuntimeError("On Spark, `database` must be omitted or equal `schema`.")
        self.database = None
        if self.method == "connect" and not (self.host or "").startswith("sc://"):
            raise DbtConfigError(
                "`method: connect` needs `host` set to a Spark Connect URL such as sc://127.0.0.1:15002"
            )
        self.host = self.host or self.method
        self.port = self.port or 0
        self.server_side_parameters = {
            str(key): str(value) for key, value in self.server_side_parameters.items()
        }

    @property
    def type(self) -> str:
        return "dyntable"

    @property
    def unique_field(self) -> str:
        return self.host or self.method

    def _connection_keys(self) -> Tuple[str, ...]:
        return ("method", "host", "port", "schema", "warehouse", "metadata_schema")


class EngineRegistry:
    """One engine per process and profile target, shared by dbt's threads, stopped at exit.

    dbt opens and closes connections per node; starting an engine per connection would cost a
    server start each time and, for the embedded engine, a separate in-memory catalog.
    """

    project_root: Path = Path.cwd()
    _engines: Dict[Tuple[Any, ...], Engine] = {}
    _lock = threading.Lock()

    @classmethod
    def warehouse_of(cls, creds: DyntableCredentials) -> Path:
        path = Path(os.path.expanduser(creds.warehouse)) if creds.warehouse else DEFAULT_WAREHOUSE
        return path if path.is_absolute() else (cls.project_root / path).resolve()

    @classmethod
    def get(cls, creds: DyntableCredentials) -> Engine:
        from dbt.adapters.dyntable.engines import start_engine

        warehouse = cls.warehouse_of(creds)
        key = (creds.method, creds.host, creds.port, str(warehouse))
        with cls._lock:
            engine = cls._engines.get(key)
            if engine is None:
                engine = start_engine(
                    creds.method,
                    warehouse=warehouse,
                    port=creds.port or 0,
                    master=creds.master,
                    spark_jars=Path(creds.spark_jars).expanduser() if creds.spark_jars else None,
                    spark_conf=dict(creds.server_side_parameters),
                    connect_url=creds.host if creds.method == "connect" else None,
                )
                cls._engines[key] = engine
            return engine

    @classmethod
    def stop_all(cls) -> None:
        with cls._lock:
            engines, cls._engines = list(cls._engines.values()), {}
        for engine in engines:
            engine.stop()


atexit.register(EngineRegistry.stop_all)


class EngineCursor(SessionCursor):
    """dbt-spark's session cursor, running statements through an engine."""

    def __init__(self, engine: Engine) -> None:
        super().__init__()
        self.engine = engine

    def execute(self, sql: str, *parameters: Any) -> None:
        if parameters:
            sql = sql % parameters
        try:
            self._df = self.engine.execute(sql)
        except EngineError as exc:
            raise DbtRuntimeError(str(exc)) from exc
        except Exception as exc:
            raise DbtRuntimeError(self.engine.explain_failure(exc)) from exc


class EngineConnection(SessionConnection):
    def __init__(self, engine: Engine) -> None:
        super().__init__()
        self.engine = engine

    def cursor(self) -> EngineCursor:
        return EngineCursor(self.engine)


class EngineConnectionWrapper(SessionConnectionWrapper):
    handle: EngineConnection

    @classmethod
    def _fix_binding(cls, value: Any) -> Any:
        """A seed value as a Spark SQL literal (dbt-spark's session method renders it badly)."""
        # dbt-spark renders None as the text 'None', so an empty seed cell failed to cast.
        if value is None:
            return "NULL"
        # bool is an int to Python: dbt-spark renders True as 1.0, a decimal Sail cannot cast
        # to boolean.
        if isinstance(value, bool):
            return "true" if value else "false"
        # dbt-spark wraps text in quotes without escaping, so a quote or backslash in a seed
        # cell broke (or changed) the INSERT.
        if isinstance(value, str):
            return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
        return super()._fix_binding(value)


class DyntableConnectionManager(SparkConnectionManager):
    TYPE = "dyntable"

    @classmethod
    def open(cls, connection: Connection) -> Connection:
        if connection.state == ConnectionState.OPEN:
            return connection
        creds: DyntableCredentials = connection.credentials
        if creds.method in SPARK_METHODS:
            return super().open(connection)
        try:
            engine = EngineRegistry.get(creds)
        except EngineError as exc:
            raise DbtRuntimeError(str(exc)) from exc
        connection.handle = EngineConnectionWrapper(EngineConnection(engine))
        connection.state = ConnectionState.OPEN
        return connection

    @classmethod
    def engine_for(cls, connection: Connection) -> Engine:
        creds: DyntableCredentials = connection.credentials
        if creds.method in SPARK_METHODS:
            raise DbtRuntimeError(
                f"Dynamic tables need a Spark session; `method: {creds.method}` only runs SQL. "
                "Use `method: embedded`, `session` or `connect`."
            )
        return EngineRegistry.get(creds)
