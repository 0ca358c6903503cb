"""Profile settings and connections.

`method: embedded` (the default), `session` and `connect` run statements through an
:class:`~dbt.adapters.dyntable.engines.base.Engine` that this process starts once and shares between
dbt's threads; `thrift`, `http` and `odbc` are dbt-spark's own connections, unchanged.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Set, Tuple

from dbt.adapters.contracts.connection import Connection, ConnectionState
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.spark.connections import SparkConnectionManager, SparkCredentials
from dbt.adapters.spark.session import Connection as SessionConnection
from dbt.adapters.spark.session import Cursor as SessionCursor
from dbt.adapters.spark.session import SessionConnectionWrapper
from dbt_common.exceptions import DbtConfigError, DbtRuntimeError

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.delta_log import DeltaLog
from dbt.adapters.dyntable.dynamic_table.metadata import MetadataStore
from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService, metadata_store
from dbt.adapters.dyntable.engines import start_engine
from dbt.adapters.dyntable.engines.base import Engine, EngineError
from dbt.adapters.dyntable.engines.warehouse import Warehouse
from dbt.adapters.dyntable.vocabulary import sql_string

logger = AdapterLogger("dyntable")

ENGINE_METHODS = ("embedded", "session", "connect")
SPARK_METHODS = ("thrift", "http", "odbc")
#: What dbt-dyntable keeps in a dbt project: the default warehouse, the runner's dbt artifacts.
PROJECT_STATE = Path(".dyntable")
DEFAULT_WAREHOUSE = PROJECT_STATE / "warehouse"
DEFAULT_METADATA_SCHEMA = "dyntable_meta"
DEFAULT_HISTORY_RETENTION_DAYS = 30
#: Commits read side by side while the engine starts, in an object store (``MetadataPrefetch``).
IDENTIFY_THREADS = 8


@dataclass
class DyntableCredentials(SparkCredentials):
    """dbt-spark's credentials plus the engines this plugin starts itself."""

    method: str = "embedded"  # type: ignore[assignment]
    host: Optional[str] = None
    schema: Optional[str] = None
    port: Optional[int] = None  # type: ignore[assignment]
    warehouse: Optional[str] = None
    #: What the standard credential chains cannot say about an object-store warehouse (endpoint,
    #: region, path-style requests, plain HTTP): docs/ARCHITECTURE.md, "Object storage".
    storage_options: Optional[Dict[str, Any]] = None
    master: str = "local[*]"
    spark_jars: Optional[str] = None
    metadata_schema: str = DEFAULT_METADATA_SCHEMA
    #: Days of refresh history kept (older rows are dropped as the table is compacted); 0 keeps all.
    history_retention_days: int = DEFAULT_HISTORY_RETENTION_DAYS

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
        if self.warehouse and storage.is_url(self.warehouse) or self.storage_options:
            try:
                # Checked once here, so that a URL the adapter cannot serve fails before anything
                # runs, never making a local folder of it.
                storage.warehouse_storage(self.warehouse or "", self.storage_options)
            except storage.StorageError as exc:
                raise DbtConfigError(str(exc)) from exc
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


def warehouse_of(creds: DyntableCredentials, project_root: Path) -> str:
    """The profile's `warehouse`: an object store's URL, or an absolute path (a relative one is
    relative to the dbt project, wherever dbt was started from)."""
    return warehouse_storage_of(creds, project_root).root


def warehouse_storage_of(creds: DyntableCredentials, project_root: Path) -> storage.Storage:
    """The storage of the profile's `warehouse`, with its `storage_options`."""
    if creds.warehouse and storage.is_url(creds.warehouse):
        return storage.warehouse_storage(creds.warehouse, creds.storage_options)
    path = path_of(creds.warehouse, project_root) if creds.warehouse else (project_root / DEFAULT_WAREHOUSE)
    return storage.warehouse_storage(str(path.resolve()), creds.storage_options)


def path_of(setting: str, project_root: Path) -> Path:
    """A path setting of the profile (`warehouse`, `spark_jars`) as an absolute path: a relative
    one is relative to the dbt project, wherever dbt was started from."""
    path = Path(os.path.expanduser(setting))
    return path if path.is_absolute() else (project_root / path).resolve()


class MetadataPrefetch:
    """A metadata store opened on a thread of its own while the engine starts: deltalake reads
    the logs without holding the GIL, so the process's first refresh no longer pays for opening
    them (docs/ARCHITECTURE.md, "Metadata tables")."""

    def __init__(self, store: MetadataStore, warehouse: Warehouse) -> None:
        self._store = store
        self._warehouse = warehouse
        self._thread = threading.Thread(target=self._run, name="dyntable-metadata-prefetch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._store.prefetch()
            if self._warehouse.remote:
                self._identify_commits()
        except Exception as exc:  # noqa: BLE001 - the first refresh reads again and reports it
            logger.debug(f"Opening the metadata tables ahead of the first refresh failed: {exc}")

    def _identify_commits(self) -> None:
        """In an object store, read the commits each DT's frontier names (its own, its sources')
        side by side: every refresh checks they are still the ones consumed and when they were
        committed, and a process reads a commit once (docs/ARCHITECTURE.md, "Object storage"), so
        its refreshes then list the logs only. A table elsewhere than the warehouse's layout says
        is left to its refresh."""
        named = set()
        for frontier in self._store.frontiers().values():
            named.add((frontier.name, frontier.dt_version))
            named.update((source, read.version) for source, read in frontier.sources.items())

        def identify(table: Tuple[str, int]) -> None:
            name, version = table
            schema, _, rest = name.partition(".")
            log = DeltaLog(self._warehouse.table_location(schema, rest), since=version)
            with contextlib.suppress(Exception):
                if version >= 0 and log.exists() and log.latest_version() >= version:
                    log.commit_id(version)
                    log.commit_timestamp(version)  # where it is read as of the data timestamp

        with ThreadPoolExecutor(IDENTIFY_THREADS) as pool:
            list(pool.map(identify, sorted(named)))

    def store(self) -> MetadataStore:
        self._thread.join()
        return self._store


@dataclass
class Environment:
    """A started engine and the dynamic-table services on it (one per metadata schema)."""

    engine: Engine
    warehouse: str
    services: Dict[str, DynamicTableService] = field(default_factory=dict)
    #: Metadata stores opened while the engine started, by schema; a schema's first service takes it.
    prefetched: Dict[str, MetadataPrefetch] = field(default_factory=dict)
    _services_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def service(self, creds: DyntableCredentials) -> DynamicTableService:
        """The dynamic-table service of ``creds``' metadata schema on this engine: one per
        process, whichever of dbt's threads asks first. Two would each keep a metadata store
        with its own cached rows and batch, for the same tables."""
        with self._services_lock:
            service = self.services.get(creds.metadata_schema)
            if service is None:
                prefetched = self.prefetched.pop(creds.metadata_schema, None)
                service = self.services[creds.metadata_schema] = DynamicTableService(
                    self.engine,
                    self.warehouse,
                    creds.metadata_schema,
                    creds.history_retention_days,
                    metadata=prefetched.store() if prefetched else None,
                )
            return service

    def stop(self) -> None:
        for prefetched in self.prefetched.values():
            prefetched.store()  # not stopped mid-read by the interpreter's exit
        self.engine.stop()


class EngineRegistry:
    """One environment per process and profile target, shared by dbt's threads (and by the dbt
    invocations of one process), stopped at exit.

    dbt opens and closes connections per node; starting an engine per connection would cost a
    server start each time and, for the embedded engine, a separate in-memory catalog.
    """

    _environments: Dict[Tuple[Any, ...], Environment] = {}
    _lock = threading.Lock()

    @classmethod
    def get(cls, creds: DyntableCredentials, project_root: Path) -> Environment:
        warehouse = warehouse_storage_of(creds, project_root)
        key = (creds.method, creds.host, creds.port, warehouse.root)
        with cls._lock:
            environment = cls._environments.get(key)
            if environment is None:
                prefetch = MetadataPrefetch(
                    metadata_store(warehouse.root, creds.metadata_schema, creds.history_retention_days),
                    Warehouse(warehouse),
                )
                try:
                    engine = start_engine(
                        creds.method,
                        warehouse=warehouse,
                        port=creds.port or 0,
                        master=creds.master,
                        spark_jars=path_of(creds.spark_jars, project_root) if creds.spark_jars else None,
                        spark_conf=dict(creds.server_side_parameters),
                        connect_url=creds.host if creds.method == "connect" else None,
                    )
                except BaseException:
                    prefetch.store()  # its reads end before the error does
                    raise
                environment = cls._environments[key] = Environment(
                    engine, warehouse.root, prefetched={creds.metadata_schema: prefetch}
                )
            return environment

    @classmethod
    def stop_all(cls) -> None:
        with cls._lock:
            environments, cls._environments = list(cls._environments.values()), {}
        for environment in environments:
            environment.stop()


atexit.register(EngineRegistry.stop_all)


class EngineCursor(SessionCursor):
    """dbt-spark's session cursor, running statements through an engine. A query runs when its
    rows or columns are asked for (Spark plans it lazily), so those fail as its execution does:
    with the engine's one message (``Engine.failure_message``), not its raw error."""

    def __init__(self, engine: Engine) -> None:
        super().__init__()
        self.engine = engine

    @contextmanager
    def _failing_as_dbt(self) -> Iterator[None]:
        try:
            yield
        except EngineError as exc:
            raise DbtRuntimeError(str(exc)) from exc
        except DbtRuntimeError:
            raise
        except Exception as exc:
            raise DbtRuntimeError(self.engine.failure_message(exc)) from exc

    def execute(self, sql: str, *parameters: Any) -> None:
        if parameters:
            sql = sql % parameters
        with self._failing_as_dbt():
            self._df = self.engine.execute(sql)

    def fetchall(self) -> Any:
        with self._failing_as_dbt():
            return super().fetchall()

    def fetchone(self) -> Any:
        with self._failing_as_dbt():
            return super().fetchone()

    @property
    def description(self) -> Any:
        with self._failing_as_dbt():
            return super().description


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
            return sql_string(value)
        return super()._fix_binding(value)


class DyntableConnectionManager(SparkConnectionManager):
    """dbt-spark's connections, plus the environments this plugin starts (an engine and its
    dynamic-table services), which it owns as dbt-duckdb's connection manager owns its database."""

    TYPE = "dyntable"

    def __init__(self, profile: Any, mp_context: Any) -> None:
        super().__init__(profile, mp_context)
        self.project_root = Path(getattr(profile, "project_root", None) or Path.cwd())
        #: Engines whose statements this invocation cancelled (Ctrl-C), resumed at its end.
        self._interrupted: Set[Engine] = set()

    # An instance method where dbt-spark's is a class method: an engine's warehouse is relative
    # to the dbt project, which only the instance knows. dbt calls it through the instance.
    def open(self, connection: Connection) -> Connection:  # type: ignore[override]
        if connection.state == ConnectionState.OPEN:
            return connection
        creds: DyntableCredentials = connection.credentials
        if creds.method in SPARK_METHODS:
            return super().open(connection)
        engine = self.environment(connection).engine
        connection.handle = EngineConnectionWrapper(EngineConnection(engine))
        connection.state = ConnectionState.OPEN
        return connection

    def cancel(self, connection: Connection) -> None:
        """dbt's cancel of each open connection on Ctrl-C, before it waits for the models in
        flight: their statements are cancelled rather than run to the end (docs/ARCHITECTURE.md,
        "Interrupting a run")."""
        handle = connection.handle
        if not isinstance(handle, EngineConnectionWrapper):
            super().cancel(connection)
            return
        with self.lock:
            self._interrupted.add(handle.handle.engine)
        handle.handle.engine.interrupt()

    def cleanup_all(self) -> None:
        """dbt's end of an invocation, once the models in flight have ended."""
        super().cleanup_all()
        with self.lock:
            interrupted, self._interrupted = self._interrupted, set()
        for engine in interrupted:
            engine.resume()

    def environment(self, connection: Connection) -> Environment:
        """The engine (started on first use) and services of ``connection``'s profile target."""
        creds: DyntableCredentials = connection.credentials
        if creds.method in SPARK_METHODS:
            raise DbtRuntimeError(
                f"Dynamic tables need a Spark session; `method: {creds.method}` only runs SQL. "
                "Use `method: embedded`, `session` or `connect`."
            )
        try:
            return EngineRegistry.get(creds, self.project_root)
        except EngineError as exc:
            raise DbtRuntimeError(str(exc)) from exc
