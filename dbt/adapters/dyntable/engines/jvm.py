"""The JVM engine: Apache Spark (classic PySpark, local or on a cluster) with Delta Lake.

This is the production engine. Delta Lake's JVM jars come either from Maven (delta-spark's own
``configure_spark_with_delta_pip``) or, where Maven cannot be reached, from a local folder given as
``spark_jars``.

The catalog: a local master (``local[*]``) gets Hive support with an embedded Derby metastore in
``<warehouse>/.metastore``, so tables and views outlive the process and no re-attach is needed.
Embedded Derby serves one process at a time: a second process on the same warehouse fails to start
with an error saying so. Other masters use whatever metastore the cluster configures (its
``hive-site.xml`` or ``spark_conf``). A ``spark_conf`` that sets
``spark.sql.catalogImplementation=in-memory`` gives up that persistence; the capabilities below
then overstate it.

Starting the JVM is bounded: PySpark's own launcher waits without limit for the driver, and Maven
resolution over a network that drops packets can take many minutes before it fails. This module
launches the driver itself, so it can stop it after ``start_timeout`` seconds, read its output to
say why it failed, and end the JVM when the engine stops (PySpark keeps it until Python exits).
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import IO, TYPE_CHECKING, ClassVar, Deque, Dict, List, Mapping, Optional

from dbt.adapters.dyntable.engines.base import Capabilities, Engine, EngineError
from dbt.adapters.dyntable.engines.warehouse import Warehouse

if TYPE_CHECKING:
    from py4j.java_gateway import JavaGateway
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

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
#: How many lines of driver output to keep for error messages.
OUTPUT_TAIL_LINES = 200
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


class JvmSparkEngine(Engine):
    """Classic PySpark on a JVM (``master`` local or a cluster) with Delta Lake."""

    name: ClassVar[str] = "session"
    capabilities: ClassVar[Capabilities] = Capabilities(
        change_data_feed=True,
        # Delta 4.0's tables do not implement TRUNCATE (Spark rejects it); DELETE FROM empties them.
        truncate=False,
        alter_table_columns=True,
        persistent_catalog=True,
    )

    def __init__(
        self,
        warehouse: Path,
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

    @property
    def local(self) -> bool:
        return self.master.startswith("local")

    def conf(self) -> Dict[str, str]:
        """The Spark configuration this engine starts with (validated; the user's wins last)."""
        conf: Dict[str, str] = {
            "spark.master": self.master,
            "spark.app.name": "dbt-dyntable",
            "spark.sql.warehouse.dir": str(self.warehouse.root),
            "spark.sql.catalogImplementation": "hive",
            "spark.ui.enabled": "false",
            # Spark 4 turns ANSI mode on; the embedded engine runs with it off, and generated SQL
            # must mean the same on both (e.g. a failed cast gives NULL, not an error).
            "spark.sql.ansi.enabled": "false",
            **DELTA_CONF,
        }
        if self.local:
            # A local driver listens on this machine only; a cluster's executors must reach it.
            conf["spark.driver.bindAddress"] = "127.0.0.1"
            conf["spark.driver.host"] = "127.0.0.1"
            metastore = self.warehouse.root / METASTORE_DIR
            conf["spark.hadoop.javax.jdo.option.ConnectionURL"] = (
                f"jdbc:derby:;databaseName={metastore / 'metastore_db'};create=true"
            )
            # Derby writes derby.log into its home, which defaults to the working directory.
            conf["spark.driver.extraJavaOptions"] = f"-Dderby.system.home={metastore}"
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
        if is_remote():
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
                (self.warehouse.root / METASTORE_DIR).mkdir(exist_ok=True)
            context = SparkContext(conf=spark_conf, gateway=self._gateway)
            self._spark = SparkSession(context)
            self._check_catalog()
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
        logger.debug("dyntable: session engine started on %s, warehouse %s", self.master, self.warehouse.root)
        return self

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
                    f"The local metastore in {self.warehouse.root / METASTORE_DIR} is in use by another "
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
