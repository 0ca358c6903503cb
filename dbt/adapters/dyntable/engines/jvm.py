"""The JVM engine: Apache Spark (classic PySpark, local or on a cluster) with Delta Lake.

This is the production engine. Delta Lake's JVM jars come either from Maven (delta-spark's own
``configure_spark_with_delta_pip``) or, where Maven cannot be reached, from a local folder given as
``spark_jars``.

The catalog: a master on this machine (``local[*]``, or a standalone cluster on 127.0.0.1) gets
Hive support with an embedded Derby metastore in ``<warehouse>/.metastore``, so tables and views
outlive the process and no re-attach is needed. Embedded Derby serves one process at a time: a
second process on the same warehouse fails to start with an error saying so. Hive's Derby schema
keeps a view's text in LONG VARCHAR columns (32,700 characters at most); the engine widens them to
CLOB once, so views of any length can be created. Other masters use whatever metastore the
cluster configures (its ``hive-site.xml`` or ``spark_conf``). A ``spark_conf`` that sets
``spark.sql.catalogImplementation=in-memory`` gives up that persistence; the capabilities below
then overstate it.

The warehouse's layout is the embedded engine's (see :mod:`.warehouse`): a schema's tables live in
``<warehouse>/<schema>/<table>``, and Delta tables found there that the catalog does not know
(written outside Spark, e.g. by the `deltalake` package) are registered when the engine starts.

Starting the JVM is bounded: PySpark's own launcher waits without limit for the driver, and Maven
resolution over a network that drops packets can take many minutes before it fails. This module
launches the driver itself, so it can stop it after ``start_timeout`` seconds, read its output to
say why it failed, and end the JVM when the engine stops (PySpark keeps it until Python exits).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, ClassVar, Deque, Dict, List, Mapping, Optional
from urllib.parse import urlparse

from sqlglot import exp

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.engines.base import DATAFRAME_DEBUGGING, Capabilities, Engine, EngineError
from dbt.adapters.dyntable.engines.warehouse import Warehouse, ddl_kind, parse_ddl, with_location
from dbt.adapters.dyntable.vocabulary import quote, sql_string

if TYPE_CHECKING:
    from py4j.java_gateway import JavaGateway
    from pyspark import SparkConf
    from pyspark.sql import DataFrame, SparkSession

logger = logging.getLogger(__name__)
driver_logger = logging.getLogger(__name__ + ".driver")

DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
#: Spark 4 is built for Scala 2.13; Delta's jars must match it.
SCALA_VERSION = "2.13"
MIN_JAVA = 17
DEFAULT_START_TIMEOUT_SECS = 90.0
METASTORE_DIR = ".metastore"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
JDO_URL = "spark.hadoop.javax.jdo.option.ConnectionURL"
STALENESS_LIMIT = "spark.databricks.delta.stalenessLimit"
#: Hive's Derby schema keeps view text in these LONG VARCHAR (at most 32,700 characters) columns.
VIEW_TEXT_COLUMNS = ("VIEW_EXPANDED_TEXT", "VIEW_ORIGINAL_TEXT")
#: How many lines of driver output to keep for error messages.
OUTPUT_TAIL_LINES = 200
#: Set by PySpark once a Spark Connect session exists in a process, and inherited by its children.
CONNECT_MODE_VARIABLES = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")
MAVEN_FAILURE_MARKERS = ("unresolved dependency", "UNRESOLVED DEPENDENCIES", "resolveMavenCoordinates")


def delta_version() -> str:
    """The installed delta-spark Python package's version: the jars must match it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("delta-spark")
    except PackageNotFoundError as exc:
        raise EngineError(
            "The session engine needs the delta-spark package. Install dbt-dyntable[spark]."
        ) from exc


def jars_hint() -> str:
    ver = delta_version()
    return (
        f"set `spark_jars` in your profile to a folder containing delta-spark_{SCALA_VERSION}-{ver}.jar "
        f"and delta-storage-{ver}.jar"
    )


def find_java() -> Path:
    """The java Spark's launcher will run (JAVA_HOME first, then PATH), checked to be 17 or newer."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        java = Path(java_home) / "bin" / "java"
        if not os.access(java, os.X_OK):
            raise EngineError(
                f"JAVA_HOME is set to {java_home}, which has no bin/java. Install Java {MIN_JAVA} "
                "and set JAVA_HOME to it (or unset JAVA_HOME to use the java on PATH)."
            )
    else:
        found = shutil.which("java")
        if found is None:
            raise EngineError(
                f"The session engine needs Java {MIN_JAVA} or newer, and there is no `java` on PATH "
                f"and no JAVA_HOME. Install Java {MIN_JAVA} or set JAVA_HOME to a Java installation."
            )
        java = Path(found)
    try:
        banner = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(
            f"{java} could not be run ({exc}). Install Java {MIN_JAVA} or set JAVA_HOME."
        ) from exc
    match = re.search(r'version "(\d+)(?:\.(\d+))?', banner)
    if match:
        # Java 8 and older report "1.8.0_x".
        major = int(match.group(2) or 0) if match.group(1) == "1" else int(match.group(1))
        if major < MIN_JAVA:
            raise EngineError(
                f"{java} is Java {major}; Spark 4 needs Java {MIN_JAVA} or newer. Install Java "
                f"{MIN_JAVA} and set JAVA_HOME to it."
            )
    return java


def delta_jars(folder: Path) -> List[Path]:
    """All jars in `folder`, checked to include Delta's two jars for this Scala version."""
    if not folder.is_dir():
        raise EngineError(f"`spark_jars` is {folder}, which is not a folder. {jars_hint().capitalize()}.")
    jars = sorted(folder.glob("*.jar"))
    names = [jar.name for jar in jars]
    missing = [
        wanted
        for wanted, pattern in (
            (
                f"delta-spark_{SCALA_VERSION}-<version>.jar",
                rf"delta-spark_{re.escape(SCALA_VERSION)}-.+\.jar$",
            ),
            ("delta-storage-<version>.jar", r"delta-storage-.+\.jar$"),
        )
        if not any(re.search(pattern, name) for name in names)
    ]
    if missing:
        raise EngineError(
            f"`spark_jars` folder {folder} lacks {' and '.join(missing)}"
            f" (it holds {len(jars)} jar{'s' if len(jars) != 1 else ''}). {jars_hint().capitalize()}."
        )
    return jars


class _DriverOutput:
    """Forwards the driver's stdout/stderr to logging and keeps the last lines for errors.

    The driver's output must not reach dbt's own stdout (it may be structured logs).
    """

    def __init__(self, stream: IO[bytes]) -> None:
        self.lines: Deque[str] = deque(maxlen=OUTPUT_TAIL_LINES)
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip()
            self.lines.append(line)
            driver_logger.debug("%s", line)

    def drained(self, timeout: float = 5.0) -> str:
        self._thread.join(timeout)
        return "\n".join(self.lines)


def launch_driver(
    conf: "SparkConf", timeout: float
) -> "tuple[subprocess.Popen[bytes], JavaGateway, _DriverOutput]":
    """Start the Spark driver JVM as PySpark does, but bounded by `timeout` seconds."""
    from pyspark.find_spark_home import _find_spark_home
    from pyspark.java_gateway import launch_gateway
    from pyspark.serializers import UTF8Deserializer, read_int

    command = [os.path.join(_find_spark_home(), "bin", "spark-submit")]
    for key, value in conf.getAll():
        command += ["--conf", f"{key}={value}"]
    command += shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", "pyspark-shell"))

    info_dir = tempfile.mkdtemp(prefix="dyntable-driver-")
    info_file = os.path.join(info_dir, "conn-info")
    env = dict(os.environ, SPARK_CONNECT_MODE="0", _PYSPARK_DRIVER_CONN_INFO_PATH=info_file)
    try:
        # stdin stays open: the driver exits when it closes (that is how stop() ends it).
        proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        assert proc.stdout is not None  # stdout=PIPE
        output = _DriverOutput(proc.stdout)
        deadline = time.monotonic() + timeout
        while proc.poll() is None and not os.path.isfile(info_file) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not os.path.isfile(info_file):
            timed_out = proc.poll() is None
            # Still resolving or starting: it does not read stdin yet, so only a kill ends it.
            _end(proc, grace=0)
            raise _launch_error(output.drained(), timed_out, timeout)
        with open(info_file, "rb") as info:
            port = read_int(info)
            secret = UTF8Deserializer().loads(info)
    finally:
        shutil.rmtree(info_dir, ignore_errors=True)
    # PySpark connects to an already running driver when told its port and secret.
    saved = {k: os.environ.get(k) for k in ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET")}
    os.environ["PYSPARK_GATEWAY_PORT"], os.environ["PYSPARK_GATEWAY_SECRET"] = str(port), secret
    try:
        gateway = launch_gateway()
    except Exception:
        _end(proc)
        raise
    finally:
        for key, saved_value in saved.items():
            if saved_value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = saved_value
    return proc, gateway, output


def _end(proc: "subprocess.Popen[bytes]", grace: float = 10.0) -> None:
    """End the driver: closing its stdin makes a running one exit; kill it after `grace` s."""
    if proc.poll() is not None:
        return
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _launch_error(output: str, timed_out: bool, timeout: float) -> EngineError:
    tail = "\n".join(output.splitlines()[-15:])
    if any(marker in output for marker in MAVEN_FAILURE_MARKERS):
        return EngineError(
            "Delta Lake's jars could not be resolved from Maven (is there network access to Maven?). "
            f"To run without Maven, {jars_hint()}.\nSpark said:\n{tail}"
        )
    if timed_out:
        return EngineError(
            f"Spark's driver did not start within {timeout:.0f} s and was stopped. If it was still "
            f"resolving Delta Lake's jars from Maven, the network is too slow or blocked: {jars_hint()}."
            f"\nLast output:\n{tail}"
        )
    return EngineError(
        f"Spark's driver exited while starting. Check `master` and `spark_conf`.\nSpark said:\n{tail}"
    )


def _local_cores(master: str) -> int:
    """The cores a ``local``, ``local[n]`` or ``local[*]`` master runs tasks on."""
    match = re.match(r"local(?:\[(\d+|\*)(?:,\s*\d+)?\])?$", master.strip())
    if match and match.group(1) and match.group(1) != "*":
        return max(1, int(match.group(1)))
    if match and match.group(1) is None:
        return 1
    return max(1, os.cpu_count() or 1)


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


def _connect_session_open() -> bool:
    """Whether this process holds a Spark Connect session (an embedded or connect engine)."""
    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError:  # Spark Connect's dependencies are not installed: no session can exist
        return False
    active = getattr(ConnectSession._active_session, "session", None)
    return ConnectSession._default_session is not None or active is not None


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
        staged_delta_cost_bytes=16_000_000,
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
        self._output: Optional[_DriverOutput] = None
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
            # A driver whose executors run here listens on this machine only; a remote
            # cluster's executors must reach it.
            conf["spark.driver.bindAddress"] = "127.0.0.1"
            conf["spark.driver.host"] = "127.0.0.1"
            metastore = self.metastore_folder
            conf[JDO_URL] = self._derby_url(create=True)
            # Derby writes derby.log into its home, which defaults to the working directory.
            conf["spark.driver.extraJavaOptions"] = f"-Dderby.system.home={metastore}"
        if self.master.startswith("local"):
            # Delta rebuilds a table version's file list with a Spark job of this many tasks,
            # at every version a refresh reads; its default (50) is sized for clusters. Sized to
            # the local cores, an incremental refresh of a two-table join ran 77 tasks, not 413.
            conf["spark.databricks.delta.snapshotPartitions"] = str(_local_cores(self.master))
        if self.spark_jars is not None:
            conf["spark.jars"] = ",".join(str(jar) for jar in delta_jars(self.spark_jars.expanduser()))
        else:
            from pyspark.sql import SparkSession

            try:
                from delta import configure_spark_with_delta_pip
            except ImportError as exc:
                raise EngineError(
                    f"The session engine needs the delta-spark package ({exc}). Install "
                    "dbt-dyntable[spark], or set `spark_jars` to a folder of Delta's jars."
                ) from exc
            # delta-spark's own helper names the Maven coordinates matching its version; its
            # builder only collects options, which go to the driver launched below.
            conf.update(configure_spark_with_delta_pip(SparkSession.builder)._options)
        user = dict(self.spark_conf)
        if "spark.driver.extraJavaOptions" in user and "spark.driver.extraJavaOptions" in conf:
            user["spark.driver.extraJavaOptions"] = (
                conf["spark.driver.extraJavaOptions"] + " " + user["spark.driver.extraJavaOptions"]
            )
        conf.update(user)
        return conf

    def start(self) -> "JvmSparkEngine":
        from pyspark import SparkConf, SparkContext
        from pyspark.sql import SparkSession
        from pyspark.sql.utils import is_remote

        find_java()
        conf = self.conf()
        if is_remote() and not _connect_session_open():
            # Spark Connect mode inherited with the environment of a process that used it: this
            # one has no Connect session, so it may run the classic one.
            for variable in CONNECT_MODE_VARIABLES:
                os.environ.pop(variable, None)
        elif is_remote():
            # PySpark switches the whole process to Spark Connect once a remote session exists
            # (its functions then build Connect columns), and refuses a classic SparkContext.
            raise EngineError(
                "This process already opened a Spark Connect session (the embedded or connect "
                "engine), and PySpark cannot run a classic JVM session beside it. Run the session "
                "engine in a process of its own (one `method` per dbt invocation)."
            )
        if SparkContext._gateway is not None:
            raise EngineError(
                "A JVM Spark session already runs in this process; stop it before starting the "
                "session engine (one JVM driver per process)."
            )
        spark_conf = SparkConf(loadDefaults=False).setAll(list(conf.items()))
        # The driver starts before the warehouse is made, so a failed start leaves nothing behind.
        self._proc, self._gateway, self._output = launch_driver(spark_conf, self.start_timeout)
        try:
            self.warehouse.ensure_writable()
            if self.local:
                self.metastore_folder.mkdir(parents=True, exist_ok=True)
            context = SparkContext(conf=spark_conf, gateway=self._gateway)
            if self.local and "PYSPARK_PYTHON" not in os.environ:
                # Python UDFs run in worker processes Spark starts with `python3` from PATH, not
                # the interpreter running dbt: a UDF needing the project's packages failed to
                # unpickle there. On this machine the workers can run this very interpreter.
                context.pythonExec = conf.get("spark.pyspark.python", sys.executable)
            self._spark = SparkSession(context)
            if reads_may_be_stale(self._spark.conf.get(STALENESS_LIMIT, None)):
                # A commit this process makes could go unseen by the next statement: Spark's own
                # statements write the DTs instead (docs/ARCHITECTURE.md, "Applying").
                self.capabilities = replace(self.capabilities, merge_in_process=False)  # type: ignore[misc]
            self._check_catalog()
            if self.local and conf.get(JDO_URL) == self._derby_url(create=True):
                self._widen_view_text_columns()
            registered = self._register_found_tables()
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

    def _derby_url(self, create: bool = False) -> str:
        database = self.metastore_folder / "metastore_db"
        return f"jdbc:derby:;databaseName={database}" + (";create=true" if create else "")

    def _widen_view_text_columns(self) -> None:
        """Let the local metastore hold views of any length.

        Hive's metastore schema for Derby (as DataNucleus creates it) stores a view's SQL in two
        LONG VARCHAR columns of TBLS, which Derby caps at 32,700 characters: a longer view (dbt
        compiles some to well over that) failed with "A truncation error was encountered trying
        to shrink LONG VARCHAR ... to length 32700". Derby cannot change a column's type in
        place, so each becomes a CLOB column with the same name and contents, in one
        transaction, once per metastore. The metastore reads and writes them as strings still.
        """
        assert self._spark is not None
        self._spark.sql("SHOW TABLES IN default").collect()  # DataNucleus creates TBLS on first use
        jvm: Any = self._spark._jvm
        connection = jvm.java.sql.DriverManager.getConnection(self._derby_url())
        try:
            columns = connection.getMetaData().getColumns(None, "APP", "TBLS", None)
            types = {}
            while columns.next():
                types[columns.getString("COLUMN_NAME")] = columns.getString("TYPE_NAME")
            narrow = [c for c in VIEW_TEXT_COLUMNS if types.get(c) == "LONG VARCHAR"]
            if not narrow:
                return
            connection.setAutoCommit(False)
            statement = connection.createStatement()
            for column in narrow:
                for sql in (
                    f"ALTER TABLE APP.TBLS ADD COLUMN {column}_CLOB CLOB",
                    f"UPDATE APP.TBLS SET {column}_CLOB = CAST({column} AS CLOB)",
                    f"ALTER TABLE APP.TBLS DROP COLUMN {column}",
                    f"RENAME COLUMN APP.TBLS.{column}_CLOB TO {column}",
                ):
                    statement.executeUpdate(sql)
            connection.commit()
            logger.debug("dyntable: widened the local metastore's view text columns %s to CLOB", narrow)
        finally:
            connection.close()

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
            location = self._local_path(entry.get("Location"))
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

    def explain_failure(self, error: Exception) -> str:
        repaired = repair_unformattable_error(error)
        return str(repaired if repaired is not None else error).strip()

    @staticmethod
    def _local_path(location: Optional[str]) -> Optional[str]:
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

    def _check_catalog(self) -> None:
        """Touch the catalog now, so Delta and metastore problems surface at start, not mid-run."""
        assert self._spark is not None
        try:
            self._spark.sql("SHOW DATABASES").collect()
        except Exception as exc:  # noqa: BLE001 - translated into the setting to fix
            text = str(exc)
            delta_lines = [
                line.strip()
                for line in text.splitlines()
                if "io.delta" in line or "org.apache.spark.sql.delta" in line
            ]
            if delta_lines:
                raise EngineError(
                    f"Spark started but Delta Lake's classes are not on its classpath ({delta_lines[0]}). "
                    f"The jars given do not provide Delta: {jars_hint()}, matching delta-spark "
                    f"{delta_version()}."
                ) from exc
            if "Another instance of Derby" in text or "Failed to start database" in text:
                raise EngineError(
                    f"The local metastore in {self.metastore_folder} is in use by another "
                    "process (embedded Derby serves one at a time). Stop the other process, use a "
                    "different `warehouse`, or configure a shared Hive metastore in `spark_conf`."
                ) from exc
            raise

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
            _end(proc)
