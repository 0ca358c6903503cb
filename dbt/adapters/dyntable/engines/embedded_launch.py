"""Starting the embedded engine's Sail server and the Spark Connect session it is used through.

The server runs in a process of its own that only this one reaches (:mod:`.isolated`), unless the
profile names a ``port`` or the system cannot isolate it: then it runs in this process on
127.0.0.1 (:class:`LocalServer`), with a warning where that was not asked for (docs/ARCHITECTURE.md,
"Engines", "Who may use the embedded engine").
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Union, cast

from dbt.adapters.dyntable.engines import isolated
from dbt.adapters.dyntable.engines.base import DATAFRAME_DEBUGGING, EngineError
from dbt.adapters.dyntable.engines.isolated import IsolatedServer
from dbt.adapters.dyntable.engines.sigint import SigintAction
from dbt.adapters.dyntable.vocabulary import first_line

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The embedded engine's logger: one logging setting covers the engine and its start.
logger = logging.getLogger("dbt.adapters.dyntable.engines.embedded")

#: Sail ends an idle pinned session after 900 s by default; a long `dyntable run` must outlive that.
SESSION_TIMEOUT_ENV = "SAIL_SPARK__SESSION_TIMEOUT_SECS"
DEFAULT_SESSION_TIMEOUT_SECS = 7 * 24 * 3600

#: Settings the engine makes itself: the generated SQL and the warehouse layout rely on them.
OWN_SETTINGS: Dict[str, str] = {
    "spark.sql.warehouse.dir": "the warehouse is the profile's `warehouse`",
    "spark.sql.ansi.enabled": "dbt-dyntable's generated SQL relies on non-ANSI casts",
    "spark.sql.session.timeZone": "Delta stores timestamps in UTC; Sail types them with the session zone",
    "spark.sql.sources.default": "the embedded engine keeps Delta tables only",
}

#: Whether this process said its engines' servers cannot be isolated.
_unisolated_said = False


def _missing(exc: ImportError) -> EngineError:  # pragma: no cover - both are hard dependencies
    return EngineError(f"The embedded engine needs pysail and pyspark ({exc}). Reinstall dbt-dyntable.")


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def check_port(port: int) -> None:
    """Refuse a profile's ``port`` that another process listens on, before anything starts."""
    if port and not _port_is_free(port):
        raise EngineError(
            f"Port {port} on 127.0.0.1 is already in use, so the embedded engine cannot "
            "listen there. Set `port` in your profile to a free port, or remove it to let the "
            "engine pick one."
        )


def prepare_environment() -> None:
    """What Sail reads from the environment when it starts, unless the user set it."""
    os.environ.setdefault(SESSION_TIMEOUT_ENV, str(DEFAULT_SESSION_TIMEOUT_SECS))
    # Sail logs every session at INFO otherwise, and warns of the tasks it aborts at every stop.
    os.environ.setdefault("RUST_LOG", "warn,sail_common::actor=error")


class LocalServer:
    """Sail's server in this process, on 127.0.0.1, where any local process reaches it."""

    def __init__(self, port: int) -> None:
        try:
            from pysail.spark import SparkConnectServer
        except ImportError as exc:  # pragma: no cover - a hard dependency
            raise _missing(exc) from exc

        server = SparkConnectServer("127.0.0.1", port)
        self._sigint = SigintAction()  # the server takes SIGINT for itself (sigint.py)
        try:
            server.start(background=True)
        except Exception as exc:
            raise EngineError(
                f"The embedded engine could not listen on 127.0.0.1:{port} ({exc}). "
                "Set `port` in your profile to a free port, or remove it."
            ) from exc
        self._server = server
        self.host, self.port = server.listening_address

    def started(self) -> None:
        """The engine has started: SIGINT is Python's again (sigint.py)."""
        self._sigint.restore()

    def stop(self) -> None:
        self._server.stop()


Server = Union[IsolatedServer, LocalServer]


def start_server(port: int, remote_warehouse: bool) -> Server:
    """The server isolated as the module says, or in this process."""
    server = None if port else _isolated(remote_warehouse)
    return server if server is not None else LocalServer(port)


def _isolated(remote_warehouse: bool) -> Optional[IsolatedServer]:
    """The server in a process of its own that only this one reaches (``isolated.py``), unless
    this system allows no unprivileged user namespaces (then a warning says so, once)."""
    try:
        # An object store is reached through the child's egress process (``isolated.py``).
        return isolated.start(way_out=remote_warehouse)
    except isolated.Unisolated as exc:
        _say_unisolated(f"this system allows no unprivileged user namespaces ({exc})")
        return None
    except RuntimeError as exc:
        raise EngineError(f"The embedded engine did not start: {exc}.") from exc


def _say_unisolated(why: str) -> None:
    global _unisolated_said
    if not _unisolated_said:
        _unisolated_said = True
        logger.warning(
            "dyntable: the embedded engine's server listens on 127.0.0.1, where any local "
            "process can reach it: %s, so it cannot run in a network of its own out of their "
            'reach (docs/ARCHITECTURE.md, "Engines").',
            why,
        )


def open_session(server: Server, warehouse_root: str, conf: Mapping[str, str]) -> "SparkSession":
    """A new session of ``server`` with one pinned id, set as the engine's SQL relies on, and
    the profile's ``conf`` (`server_side_parameters`)."""
    try:
        from pyspark.sql import SparkSession
        from pyspark.sql.connect.client.retries import DefaultPolicy
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError as exc:  # pragma: no cover - a hard dependency
        raise _missing(exc) from exc

    session_id = str(uuid.uuid4())
    builder: Any
    if isinstance(server, IsolatedServer):
        # What a `remote()` builder marks before it creates a session: PySpark's functions
        # (F.col, ...) build Spark Connect expressions only in a process so marked.
        os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
        builder = ConnectSession.builder.channelBuilder(server.channel_builder(session_id))
    else:
        builder = SparkSession.builder.remote(f"sc://{server.host}:{server.port}/;session_id={session_id}")
    # create(), not getOrCreate(): the latter hands back any Spark Connect session already
    # open in this process (another engine's, on another server and warehouse).
    spark = builder.create()
    # The server is this process's own: if it stops answering it is gone, and Spark
    # Connect's default policy would retry for ten minutes before saying so.
    spark.client.set_retry_policies([DefaultPolicy(max_retries=4, max_backoff=1000)])
    spark.conf.set("spark.sql.warehouse.dir", warehouse_root)
    spark.conf.set("spark.sql.ansi.enabled", "false")
    # Sail types `timestamp` columns with the session zone, and Delta stores them as UTC:
    # re-attaching under another zone name ("Etc/UTC") is refused as a schema mismatch.
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    # A table created without USING (dbt-spark's, where `file_format` is not set) is Delta,
    # the one format the warehouse re-attaches and dynamic tables read.
    spark.conf.set("spark.sql.sources.default", "delta")
    spark.conf.set(DATAFRAME_DEBUGGING, "false")
    _apply_settings(spark, conf)
    return cast("SparkSession", spark)


def _apply_settings(spark: "SparkSession", conf: Mapping[str, str]) -> None:
    """The profile's `server_side_parameters`, as session settings. Sail takes any key and
    checks a value only when a query reads it, so each is tried with a query at once: a bad
    one fails here, naming itself, not in the middle of a model."""
    for key, value in conf.items():
        reason = OWN_SETTINGS.get(key)
        if reason is not None:
            raise EngineError(
                f"`server_side_parameters` sets {key}, which the embedded engine sets itself "
                f"({reason}). Remove it from the profile."
            )
        spark.conf.set(key, value)
        try:
            spark.sql("SELECT 1").collect()
        except Exception as exc:
            raise EngineError(
                f"`server_side_parameters`: the embedded engine (Sail) refused {key} = {value!r} "
                f"({first_line(exc)}). Fix or remove it in the profile."
            ) from exc
