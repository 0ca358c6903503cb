"""Any Spark Connect server (``sc://host:port``): Spark 3.4+ / 4.x with Delta, Databricks, or Sail.

What the server supports is not known from here, so the capabilities are the conservative ones:
no change data feed, no TRUNCATE, no ALTER TABLE columns, unless the profile says otherwise. The
server is expected to keep its own catalog.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, ClassVar, Optional
from urllib.parse import urlparse

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.engines.base import Capabilities, Engine, EngineError, stop_connect_session
from dbt.adapters.dyntable.vocabulary import first_line

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: How long to wait for the server's port to accept a connection before saying it is not there.
CONNECT_PROBE_SECS = 5.0


class ConnectEngine(Engine):
    """A Spark Connect client session on a server this process did not start."""

    name: ClassVar[str] = "connect"
    capabilities: ClassVar[Capabilities] = Capabilities(
        change_data_feed=False,
        truncate=False,
        alter_table_columns=False,
        persistent_catalog=True,
    )

    def __init__(self, connect_url: str, change_data_feed: bool = False) -> None:
        self.connect_url = connect_url
        self._spark: Optional["SparkSession"] = None
        if change_data_feed:
            # Per instance: the profile states the server has Delta's change data feed.
            self.capabilities = Capabilities(  # type: ignore[misc]
                change_data_feed=True, truncate=False, alter_table_columns=False, persistent_catalog=True
            )

    def _address(self) -> "tuple[str, int]":
        parsed = urlparse(self.connect_url)
        if parsed.scheme != "sc" or not parsed.hostname:
            raise EngineError(
                f"`connect_url` is {self.connect_url!r}; it must be a Spark Connect URL such as "
                "sc://127.0.0.1:15002."
            )
        try:
            port = parsed.port or 15002
        except ValueError as exc:
            raise EngineError(f"`connect_url` {self.connect_url!r} has an invalid port.") from exc
        return parsed.hostname, port

    def start(self) -> "ConnectEngine":
        from pyspark.sql import SparkSession

        host, port = self._address()
        # The Spark Connect client retries an absent server for minutes; find out in seconds.
        try:
            socket.create_connection((host, port), timeout=CONNECT_PROBE_SECS).close()
        except OSError as exc:
            raise EngineError(
                f"No Spark Connect server answers at {host}:{port} ({exc.strerror or exc}). Start it, "
                "or fix `connect_url` in your profile."
            ) from exc
        # create(), not getOrCreate(): the latter returns any session already open in this
        # process, whatever its URL.
        spark = SparkSession.builder.remote(self.connect_url).create()
        try:
            spark.sql("SELECT 1").collect()
        except Exception as exc:
            stop_connect_session(spark)
            raise EngineError(
                f"The Spark Connect server at {self.connect_url} did not run a query: "
                f"{first_line(exc)}. Check `connect_url`."
            ) from exc
        self._spark = spark
        return self

    def engine_location(self, location: str) -> str:
        # Hadoop's name for S3, which Spark with hadoop-aws and Sail both read.
        return storage.spark_location(location)

    @property
    def spark(self) -> "SparkSession":
        if self._spark is None:
            raise EngineError("The connect engine is not running (it was stopped or never started).")
        return self._spark

    def stop(self) -> None:
        spark, self._spark = self._spark, None
        if spark is not None:
            stop_connect_session(spark)
