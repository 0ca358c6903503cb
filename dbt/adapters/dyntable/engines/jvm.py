"""The JVM engine: Apache Spark (classic PySpark, local or on a cluster) with Delta Lake.

This is the production engine. Its driver is launched by :mod:`.jvm_launch` (Java, Delta Lake's
jars from Maven or ``spark_jars``, a start bounded by ``start_timeout``); this module configures
the session and runs its statements.

The catalog: a master on this machine (``local[*]``, or a standalone cluster on 127.0.0.1) gets
the warehouse's own embedded Derby metastore (:mod:`.jvm_metastore`). Other masters use whatever
metastore the cluster configures (its ``hive-site.xml`` or ``spark_conf``). A ``spark_conf`` that
sets ``spark.sql.catalogImplementation=in-memory`` gives up that persistence; the capabilities
below then overstate it.

The warehouse's layout is the embedded engine's (see :mod:`.warehouse`): a schema's tables live in
``<warehouse>/<schema>/<table>``, and Delta tables found there that the catalog does not know
(written outside Spark, e.g. by the `deltalake` package) are registered when the engine starts.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Dict, Mapping, Optional
from urllib.parse import urlparse

from sqlglot import exp

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.engines.base import DATAFRAME_DEBUGGING, Capabilities, Engine, EngineError
from dbt.adapters.dyntable.engines.jvm_launch import (
    DELTA_CONF,
    DriverOutput,
    delta_classpath,
    driver_exit,
    end_driver,
    find_java,
    launch_driver,
    local_cores,
    refuse_other_sessions,
)
from dbt.adapters.dyntable.engines.jvm_metastore import (
    JDO_URL,
    METASTORE_DIR,
    check_catalog,
    derby_url,
    local_metastore_conf,
    widen_view_text_columns,
)
from dbt.adapters.dyntable.engines.warehouse import Warehouse, ddl_kind, parse_ddl, with_location
from dbt.adapters.dyntable.vocabulary import quote, sql_string

if TYPE_CHECKING:
    from py4j.java_gateway import JavaGateway
    from pyspark import SparkConf
    from pyspark.sql import DataFrame, SparkSession

logger = logging.getLogger(__name__)

DEFAULT_START_TIMEOUT_SECS = 90.0
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
STALENESS_LIMIT = "spark.databricks.delta.stalenessLimit"


def repair_unformattable_error(error: BaseException) -> Optional[Exception]:
    """The error PySpark meant to raise, where building it failed; None for any other error.

    PySpark 4.0 turns a JVM error into its own exception class and, when the error points into
    the SQL text (a query context), logs it with ``getMessage()``, which asks Spark's
    ``SparkThrowableHelper`` to format the error class. Spark's helper knows only Spark's error
    classes, not Delta's, so for an error such as ``DELTA_MERGE_UNRESOLVED_EXPRESSION`` that call
    itself fails, and what reaches the caller is ``[INTERNAL_ERROR] Cannot find main error class
    'DELTA_MERGE_UNRESOLVED_EXPRESSION'`` instead of Delta's message, which names the column.
    Delta's own message is intact on the JVM exception: this rebuilds PySpark's exception from it.
    """
    from py4j.protocol import Py4JJavaError

    if not isinstance(error, Py4JJavaError) or UNFORMATTABLE not in _java_message(error):
        return None
    original = error.__context__
    while original is not None and not isinstance(original, Py4JJavaError):
        original = original.__context__
    if original is None:
        return None
    from py4j.java_gateway import is_instance_of
    from pyspark import SparkContext
    from pyspark.errors.exceptions.captured import (
        AnalysisException,
        ParseException,
        UnknownException,
    )

    java = original.java_exception
    gateway = SparkContext._gateway
    message = _java_message(original)
    trace = SparkContext._jvm.org.apache.spark.util.Utils.exceptionString(java) if SparkContext._jvm else ""
    if gateway is not None and is_instance_of(
        gateway, java, "org.apache.spark.sql.catalyst.parser.ParseException"
    ):
        return ParseException(desc=message, stackTrace=trace)
    if gateway is not None and is_instance_of(gateway, java, "org.apache.spark.sql.AnalysisException"):
        return AnalysisException(desc=message, stackTrace=trace)
    return UnknownException(desc=message, stackTrace=trace)


#: What Spark says when asked to format an error class it does not know (Delta's, for one).
UNFORMATTABLE = "Cannot find main error class"


def _java_message(error: BaseException) -> str:
    try:
        return str(error.java_exception.getMessage())  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - the JVM may be gone
        return str(error)


def reads_may_be_stale(limit: Optional[str]) -> bool:
    """Whether Delta may answer a statement from a table's snapshot up to ``limit`` old (its
    ``stalenessLimit``, a duration) instead of reading the log afresh, as it does at 0, the
    default."""
    return limit is not None and re.fullmatch(r"0*(\.0*)?\s*[a-z]*", limit.strip().lower()) is None


def warehouse_path(location: Optional[str]) -> Optional[str]:
    """A catalog's location as the warehouse names it (a local path, or ``s3://`` for
    Spark's ``s3a://``); None for another kind."""
    if not location:
        return None
    if location.startswith("file:"):
        location = location.removeprefix("file:")
        location = "/" + location.lstrip("/")
    if storage.is_url(location):
        return storage.normalized(location)
    return location if location.startswith("/") else None


class JvmSparkEngine(Engine):
    """Classic PySpark on a JVM (``master`` local or a cluster) with Delta Lake."""

    name: ClassVar[str] = "session"
    capabilities: ClassVar[Capabilities] = Capabilities(
        change_data_feed=True,
        # delta-spark reads a table's log afresh for each statement, unless a staleness limit
        # is set (then off, at start).
        merge_in_process=True,
        # Delta 4.0's tables do not implement TRUNCATE (Spark rejects it); DELETE FROM empties them.
        truncate=False,
        alter_table_columns=True,
        persistent_catalog=True,
        counts_held_rows_in_process=True,
        job_cost_bytes=8_000_000,
        grouping_cost=5.0,
        # Spark lists up to 32 paths on the driver (spark.sql.sources.parallelPartitionDiscovery
        # .threshold); more start a listing job, which the Delta scan avoids.
        versions_from_files=32,
        parquet_scan_merges_file_types=False,
        deletion_vectors=True,
    )

    def __init__(
        self,
        warehouse: "Path | str | storage.Storage",
        master: str = "local[*]",
        spark_jars: Optional[Path] = None,
        spark_conf: Optional[Mapping[str, str]] = None,
        start_timeout: float = DEFAULT_START_TIMEOUT_SECS,
    ) -> None:
        self.warehouse = Warehouse(warehouse)
        self.master = master
        self.spark_jars = spark_jars
        self.spark_conf: Dict[str, str] = dict(spark_conf or {})
        self.start_timeout = start_timeout
        self._spark: Optional["SparkSession"] = None
        self._proc: Optional["subprocess.Popen[bytes]"] = None
        self._gateway: Optional["JavaGateway"] = None
        self._output: Optional[DriverOutput] = None
        self._catalog: Optional[Any] = None  # the session catalog and the classes to ask it

    @property
    def local(self) -> bool:
        """The driver and its executors run on this machine: a ``local`` master, or a cluster
        whose master listens on loopback (a standalone cluster started here). Then the driver
        listens on 127.0.0.1 only and the catalog is the warehouse's own Derby metastore."""
        if self.master.startswith("local"):
            return True
        host = urlparse(self.master).hostname if "://" in self.master else None
        return host in LOOPBACK_HOSTS

    def conf(self) -> Dict[str, str]:
        """The Spark configuration this engine starts with (validated; the user's wins last)."""
        conf: Dict[str, str] = {
            "spark.master": self.master,
            "spark.app.name": "dbt-dyntable",
            "spark.sql.warehouse.dir": self.engine_location(self.warehouse.root),
            # An object store's settings, in Hadoop's S3A names (docs/ARCHITECTURE.md, "Object storage").
            **storage.hadoop_configuration(self.warehouse.storage),
            "spark.sql.catalogImplementation": "hive",
            "spark.ui.enabled": "false",
            # Spark 4 turns ANSI mode on; the embedded engine runs with it off, and generated SQL
            # must mean the same on both (e.g. a failed cast gives NULL, not an error).
            "spark.sql.ansi.enabled": "false",
            # A table created without USING (dbt-spark's, where `file_format` is not set) is Delta,
            # as on the embedded engine: dynamic tables read Delta tables only.
            "spark.sql.sources.default": "delta",
            DATAFRAME_DEBUGGING: "false",
            **DELTA_CONF,
        }
        if self.local:
            conf.update(local_metastore_conf(self.metastore_folder))
        if self.master.startswith("local"):
            # Delta rebuilds a table version's file list with a Spark job of this many tasks,
            # at every version a refresh reads; its default (50) is sized for clusters. Sized to
            # the local cores, an incremental refresh of a two-table join ran 77 tasks, not 413.
            conf["spark.databricks.delta.snapshotPartitions"] = str(local_cores(self.master))
        conf.update(delta_classpath(self.spark_jars))
        user = dict(self.spark_conf)
        if "spark.driver.extraJavaOptions" in user and "spark.driver.extraJavaOptions" in conf:
            user["spark.driver.extraJavaOptions"] = (
                conf["spark.driver.extraJavaOptions"] + " " + user["spark.driver.extraJavaOptions"]
            )
        conf.update(user)
        return conf

    def start(self) -> "JvmSparkEngine":
        from pyspark import SparkConf

        find_java()
        conf = self.conf()
        refuse_other_sessions()
        spark_conf = SparkConf(loadDefaults=False).setAll(list(conf.items()))
        # The driver starts before the warehouse is made, so a failed start leaves nothing behind.
        self._proc, self._gateway, self._output = launch_driver(spark_conf, self.start_timeout)
        try:
            registered = self._open_session(spark_conf)
        except EngineError:
            self.stop()
            raise
        except Exception as exc:
            # Read the error before stopping: a Py4J error asks the (then gone) JVM for its text.
            reason = (str(exc).splitlines() or [repr(exc)])[0]
            output = self._output.drained(0.5) if self._output else ""
            self.stop()
            raise EngineError(
                f"Spark started but its session failed: {reason}. Check `master` and `spark_conf`."
                "\nSpark said:\n" + "\n".join(output.splitlines()[-15:])
            ) from exc
        logger.debug(
            "dyntable: session engine started on %s, warehouse %s; registered %s tables found there",
            self.master,
            self.warehouse.root,
            registered,
        )
        return self

    def _open_session(self, spark_conf: "SparkConf") -> int:
        """The session over the launched driver, its catalog checked; returns how many tables
        found in the warehouse it registered."""
        from pyspark import SparkContext
        from pyspark.sql import SparkSession

        self.warehouse.ensure_writable()
        if self.local:
            self.metastore_folder.mkdir(parents=True, exist_ok=True)
        context = SparkContext(conf=spark_conf, gateway=self._gateway)
        if self.local and "PYSPARK_PYTHON" not in os.environ:
            # Python UDFs run in worker processes Spark starts with `python3` from PATH, not
            # the interpreter running dbt: a UDF needing the project's packages failed to
            # unpickle there. On this machine the workers can run this very interpreter.
            context.pythonExec = spark_conf.get("spark.pyspark.python", sys.executable)
        self._spark = SparkSession(context)
        if reads_may_be_stale(self._spark.conf.get(STALENESS_LIMIT, None)):
            # A commit this process makes could go unseen by the next statement: Spark's own
            # statements write the DTs instead (docs/ARCHITECTURE.md, "Applying").
            self.capabilities = replace(self.capabilities, merge_in_process=False)  # type: ignore[misc]
        check_catalog(self._spark, self.metastore_folder)
        if self.local and spark_conf.get(JDO_URL) == derby_url(self.metastore_folder, create=True):
            widen_view_text_columns(self._spark, self.metastore_folder)
        return self._register_found_tables()

    def _register_found_tables(self) -> int:
        """Register the Delta tables under the warehouse that the catalog does not know.

        Tables written outside Spark (an ingest job using the `deltalake` package, the shop's
        generator) sit at ``<warehouse>/<schema>/<table>`` as the embedded engine's do; a dbt
        source naming them must find them here too. Tables are registered at their location
        (external), so Delta reads their schema and history from their log.
        """
        assert self._spark is not None
        registered = 0
        for schema in self.warehouse.schemas():
            if "." in schema:
                continue  # Spark's own `<schema>.db` folders of schemas made before this layout
            self.execute(f"CREATE SCHEMA IF NOT EXISTS {quote(schema)}")
            known = {
                row["tableName"].lower()
                for row in self._spark.sql(f"SHOW TABLES IN {quote(schema)}").collect()
            }
            for table in self.warehouse.tables(schema):
                if table.name in known:
                    continue
                self._spark.sql(
                    f"CREATE TABLE IF NOT EXISTS {quote(schema)}.{quote(table.name)} USING delta "
                    f"LOCATION {sql_string(self.engine_location(str(table.location)))}"
                )
                registered += 1
        return registered

    # -- statements ------------------------------------------------------------------------------

    def _run(self, statement: str) -> "DataFrame":
        """Statements run as written, except two DDL adaptations that keep the warehouse's layout
        the embedded engine's: a schema without LOCATION gets ``<warehouse>/<schema>`` (Spark
        would pick ``<warehouse>/<schema>.db``), and dropping a table whose files lie in the
        warehouse deletes them, as dropping a managed table does (otherwise the table would be
        registered again from its files at the next start)."""
        ddl = parse_ddl(statement)
        kind = ddl_kind(ddl) if ddl is not None else ""
        if (
            isinstance(ddl, exp.Create)
            and kind in ("SCHEMA", "DATABASE")
            and not ddl.find(exp.LocationProperty)
        ):
            name = ddl.this.db or ddl.this.name
            if name and name.lower() != "default":
                statement = with_location(ddl, self.engine_location(self.warehouse.schema_path(name)))
        elif isinstance(ddl, exp.Drop) and kind == "TABLE" and len(ddl.args.get("tables") or []) == 1:
            target = ddl.args["tables"][0]
            schema = target.db or self.spark.catalog.currentDatabase()
            entry = self.catalog_entry(schema, target.name)
            result = self._sql(statement)
            location = warehouse_path(entry.get("Location"))
            if entry.get("Type") == "EXTERNAL" and location is not None and self.warehouse.contains(location):
                self.warehouse.drop_table(location)
            return result
        return self._sql(statement)

    def _sql(self, statement: str) -> "DataFrame":
        try:
            return self.spark.sql(statement)
        except Exception as exc:  # noqa: BLE001 - re-raised, repaired where PySpark broke it
            repaired = repair_unformattable_error(exc)
            if repaired is None:
                raise
            raise repaired from None

    def _catalog_entry(self, schema: str, name: str) -> Dict[str, str]:
        """The entry, asked of the session's catalog directly: a few Py4J calls, where a `SHOW
        TABLE EXTENDED` is a command parsed, planned and collected (30-50 ms). The same keys as
        that command's lines: Type, Location, View Text."""
        from py4j.protocol import Py4JError
        from pyspark.errors import AnalysisException

        if self._catalog is None:
            # Each step of a JVM path is a Py4J call: resolve the classes once.
            jvm = self.spark._jvm
            assert jvm is not None
            self._catalog = (
                self.spark._jsparkSession.sessionState().catalog(),
                jvm.org.apache.spark.sql.catalyst.TableIdentifier,
                jvm.scala.Some,
            )
        catalog, table_identifier, some = self._catalog
        try:
            table = catalog.getTableMetadata(table_identifier(name, some(schema)))
        except (AnalysisException, Py4JError):  # no such table, or no such schema
            return {}
        entry = {"Type": str(table.tableType().name())}
        location, text = table.storage().locationUri(), table.viewText()
        if location.isDefined():
            entry["Location"] = str(location.get().toString())
        if text.isDefined():
            entry["View Text"] = str(text.get())
        return entry

    def interrupt(self) -> None:
        """``interruptAll`` cancels only jobs tagged with the session (an ``INSERT ... SELECT`` once
        ran to its end under it): every job of the context, this engine's alone, is cancelled too
        (docs/ARCHITECTURE.md, "Interrupting a run")."""
        super().interrupt()
        try:
            self.spark.sparkContext.cancelAllJobs()
        except Exception:  # noqa: BLE001 - a stopped context runs nothing to cancel
            pass

    def explain_failure(self, error: Exception) -> str:
        exited = driver_exit(self._proc, self._output, error) if self._proc and self._output else None
        return exited or str(repair_unformattable_error(error) or error).strip()

    @property
    def metastore_folder(self) -> Path:
        """The local Derby metastore's folder: in the warehouse, or, for a warehouse in an object
        store (where Derby cannot write), in this user's home, one per warehouse URL. A shared
        metastore (``spark.hadoop.hive.metastore.uris``) is what several machines need."""
        if not self.warehouse.remote:
            return Path(self.warehouse.root) / METASTORE_DIR
        digest = hashlib.sha1(self.warehouse.root.encode()).hexdigest()[:12]
        return Path.home() / ".dyntable" / "metastore" / digest

    def engine_location(self, location: str) -> str:
        return storage.spark_location(location)

    @property
    def spark(self) -> "SparkSession":
        if self._spark is None:
            raise EngineError("The session engine is not running (it was stopped or never started).")
        return self._spark

    def stop(self) -> None:
        from pyspark import SparkContext

        spark, self._spark = self._spark, None
        self._catalog = None
        gateway, self._gateway = self._gateway, None
        proc, self._proc = self._proc, None
        if spark is not None:
            try:
                spark.stop()
            except Exception:  # noqa: BLE001 - the driver may already be gone
                pass
        if SparkContext._active_spark_context is not None:
            # The session failed before wrapping the context; stop the context directly.
            try:
                SparkContext._active_spark_context.stop()
            except Exception:  # noqa: BLE001
                pass
        if gateway is not None:
            try:
                gateway.shutdown()
            except Exception:  # noqa: BLE001
                pass
            # PySpark keeps its gateway for the process; a later engine must launch its own JVM.
            if SparkContext._gateway is gateway:
                SparkContext._gateway = None
                SparkContext._jvm = None
        if proc is not None:
            end_driver(proc)
