"""Starting the session engine's Spark driver JVM: Java, Delta Lake's jars, a bounded launch.

Delta Lake's JVM jars come either from Maven (delta-spark's own ``configure_spark_with_delta_pip``)
or, where Maven cannot be reached, from a local folder given as ``spark_jars``.

Starting the JVM is bounded: PySpark's own launcher waits without limit for the driver, and Maven
resolution over a network that drops packets can take many minutes before it fails. This module
launches the driver itself, so the engine can stop it after ``start_timeout`` seconds, read its
output to say why it failed, and end the JVM when the engine stops (PySpark keeps it until Python
exits).
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
from typing import IO, TYPE_CHECKING, Deque, Dict, List, Optional

from dbt.adapters.dyntable.engines.base import EngineError

if TYPE_CHECKING:
    from py4j.java_gateway import JavaGateway
    from pyspark import SparkConf

# A child of the session engine's logger: one logging setting covers the engine and its driver.
driver_logger = logging.getLogger("dbt.adapters.dyntable.engines.jvm.driver")

DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
#: Spark 4 is built for Scala 2.13; Delta's jars must match it.
SCALA_VERSION = "2.13"
MIN_JAVA = 17
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


def delta_classpath(spark_jars: Optional[Path]) -> Dict[str, str]:
    """The Spark settings that put Delta Lake's jars on the driver's classpath: the jars of the
    ``spark_jars`` folder, else the Maven coordinates matching the installed delta-spark."""
    if spark_jars is not None:
        return {"spark.jars": ",".join(str(jar) for jar in delta_jars(spark_jars.expanduser()))}
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
    options: Dict[str, str] = configure_spark_with_delta_pip(SparkSession.builder)._options
    return options


class DriverOutput:
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
) -> "tuple[subprocess.Popen[bytes], JavaGateway, DriverOutput]":
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
        output = DriverOutput(proc.stdout)
        deadline = time.monotonic() + timeout
        while proc.poll() is None and not os.path.isfile(info_file) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not os.path.isfile(info_file):
            timed_out = proc.poll() is None
            # Still resolving or starting: it does not read stdin yet, so only a kill ends it.
            end_driver(proc, grace=0)
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
        end_driver(proc)
        raise
    finally:
        for key, saved_value in saved.items():
            if saved_value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = saved_value
    return proc, gateway, output


def end_driver(proc: "subprocess.Popen[bytes]", grace: float = 10.0) -> None:
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


#: Why a driver ended itself, by Spark's exit codes (``SparkExitCode``).
SPARK_EXIT_REASONS = {
    50: "an uncaught exception",
    51: "an uncaught exception while handling another",
    52: "out of memory",
}
#: How long a statement's failure waits to see whether the driver is exiting: Spark answers the
#: statement a fatal error failed before its handler ends the JVM.
DRIVER_EXIT_WAIT_SECS = 2.0
#: Errors that mean the driver may be gone, or going: a refused or dropped Py4J connection, or a
#: fatal JVM error, after which Spark's handler ends a local driver.
DRIVER_GONE_SIGNS = (
    "Connection refused",
    "Broken pipe",
    "Py4JNetworkError",
    "OutOfMemoryError",
    "StackOverflowError",
)


def driver_exit(proc: "subprocess.Popen[bytes]", output: DriverOutput, error: BaseException) -> Optional[str]:
    """One message for a statement that failed because the driver JVM exited, or None while it
    runs. Every statement after such an exit fails with a refused connection; this says why once,
    with the driver's last words (otherwise only in the debug log)."""
    if proc.poll() is None and any(sign in f"{type(error).__name__}: {error}" for sign in DRIVER_GONE_SIGNS):
        try:
            proc.wait(timeout=DRIVER_EXIT_WAIT_SECS)
        except subprocess.TimeoutExpired:
            pass
    code = proc.poll()
    if code is None:
        return None
    if code < 0:
        why = f"killed by signal {-code}" + (
            ", as the system's out-of-memory killer does" if code == -9 else ""
        )
    else:
        why = f"exit code {code}" + (f": {SPARK_EXIT_REASONS[code]}" if code in SPARK_EXIT_REASONS else "")
    lines = output.drained(0.5).splitlines()
    said = [line for line in lines if "ERROR" in line or "Exception" in line or "Error:" in line][-10:]
    return (
        f"Spark's driver JVM exited ({why}); this statement and every one after it in this process "
        "fail. If it ran out of memory, raise `spark.driver.memory` (Spark's default: 1g) in the "
        "profile's `server_side_parameters`, then run again.\nSpark said:\n" + "\n".join(said or lines[-15:])
    )


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


def local_cores(master: str) -> int:
    """The cores a ``local``, ``local[n]`` or ``local[*]`` master runs tasks on."""
    match = re.match(r"local(?:\[(\d+|\*)(?:,\s*\d+)?\])?$", master.strip())
    if match and match.group(1) and match.group(1) != "*":
        return max(1, int(match.group(1)))
    if match and match.group(1) is None:
        return 1
    return max(1, os.cpu_count() or 1)


def connect_session_open() -> bool:
    """Whether this process holds a Spark Connect session (an embedded or connect engine)."""
    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError:  # Spark Connect's dependencies are not installed: no session can exist
        return False
    active = getattr(ConnectSession._active_session, "session", None)
    return ConnectSession._default_session is not None or active is not None


def refuse_other_sessions() -> None:
    """Check this process can run a classic JVM session, or say why not."""
    from pyspark import SparkContext
    from pyspark.sql.utils import is_remote

    if is_remote() and not connect_session_open():
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
