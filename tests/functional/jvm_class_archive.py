"""A class-data-sharing archive for the Spark driver JVMs the JVM suite starts.

Most of the JVM suite's time is dbt processes that each start a Spark driver, and most of a
driver's start is loading and verifying Spark's, Hive's and Delta's classes. A dynamic CDS archive
(JDK 13+) holds those classes as the JVM left them after loading: a driver mapping it started in
6 s instead of 11 s (start plus three statements: 16 s instead of 25 s, a third less CPU).

The archive is made once per machine and setup, by a driver that runs a small Delta workload and is
then asked to dump what it loaded (``jcmd <pid> VM.cds dynamic_dump``), and kept in pytest's cache
under a key of the Java, Spark and Delta it was made with. Drivers pick it up through
``SPARK_SUBMIT_OPTS``, which Spark's launcher adds to a driver's command line, so it reaches every
driver the suite starts, also those of dbt processes in a project's own profile. A JVM whose
classpath does not match the archive ignores it (silently, with CDS logging off): it changes how
fast a driver starts, never what it computes.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

#: What every driver of the suite is started with, once the archive exists.
SUBMIT_OPTS_ENV = "SPARK_SUBMIT_OPTS"
#: A small workload touching what dbt runs touch: the Hive catalog, Delta's writes, reads,
#: history and time travel, views, and a join, an aggregate and a window.
WORKLOAD = (
    "CREATE SCHEMA IF NOT EXISTS archive",
    "CREATE TABLE archive.t (k INT, v STRING, d DATE) USING delta",
    "INSERT INTO archive.t VALUES (1, 'a', DATE'2024-01-01'), (2, 'b', DATE'2024-01-02')",
    "UPDATE archive.t SET v = 'c' WHERE k = 2",
    "DELETE FROM archive.t WHERE k = 1",
    "MERGE INTO archive.t AS t USING (SELECT 3 AS k, 'd' AS v, DATE'2024-01-03' AS d) AS s "
    "ON t.k <=> s.k WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
    "CREATE OR REPLACE VIEW archive.w AS SELECT k, v, count(*) OVER (PARTITION BY d) AS n FROM archive.t",
    "SELECT a.k, sum(b.n) FROM archive.t VERSION AS OF 1 AS a JOIN archive.w AS b ON a.k = b.k GROUP BY a.k",
    "DESCRIBE HISTORY archive.t",
    "DESCRIBE DETAIL archive.t",
    "SHOW TABLES IN archive",
)


def driver_options(archive: Path) -> str:
    return f"-XX:SharedArchiveFile={archive} -Xlog:cds=off -Xlog:cds+dynamic=off"


def archive_key(jars: Path) -> str:
    """What the archive depends on: the Java that runs drivers, Spark's jars and Delta's."""
    from pyspark.find_spark_home import _find_spark_home

    from dbt.adapters.dyntable.engines.jvm_launch import find_java

    java = find_java()
    version = subprocess.run([str(java), "-version"], capture_output=True, text=True).stderr
    parts = [str(java.resolve()), version]
    for folder in (Path(_find_spark_home()) / "jars", jars):
        parts += [f"{p.name}:{p.stat().st_size}" for p in sorted(folder.glob("*.jar"))]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def build(archive: Path, jars: Path) -> None:
    """Make ``archive`` with a driver that ran the workload (written beside it, then renamed,
    so a reader never maps a partial file)."""
    from dbt.adapters.dyntable.engines.jvm import JvmSparkEngine
    from dbt.adapters.dyntable.engines.jvm_launch import find_java
    from tests.functional.profiles import JVM_TEST_CONF, SHORT_LIVED_JVM_CONF

    archive.parent.mkdir(parents=True, exist_ok=True)
    options = SHORT_LIVED_JVM_CONF["spark.driver.extraJavaOptions"] + " -XX:+RecordDynamicDumpInfo"
    with tempfile.TemporaryDirectory(prefix="dyntable-class-archive-") as warehouse:
        engine = JvmSparkEngine(
            Path(warehouse),
            spark_jars=jars,
            spark_conf={**JVM_TEST_CONF, "spark.driver.extraJavaOptions": options},
        ).start()
        partial = archive.with_name(f"{archive.name}.{os.getpid()}.part")
        try:
            for statement in WORKLOAD:
                engine.spark.sql(statement).collect()
            pid = engine.spark._jvm.java.lang.ProcessHandle.current().pid()  # type: ignore[union-attr]
            subprocess.run(
                [str(find_java().parent / "jcmd"), str(pid), "VM.cds", "dynamic_dump", str(partial)],
                check=True,
                capture_output=True,
                timeout=300,
            )
        finally:
            engine.stop()
        partial.rename(archive)


def prepare(cache_folder: Path, jars: Path) -> Optional[str]:
    """The driver options that map the archive for these jars, making it first where it is not
    in ``cache_folder``; None (drivers start without it) where it cannot be made."""
    archive = cache_folder / f"driver-{archive_key(jars)}.jsa"
    if not archive.is_file():
        command = [sys.executable, "-m", "tests.functional.jvm_class_archive", str(archive), str(jars)]
        repo = Path(__file__).resolve().parents[2]
        try:
            done = subprocess.run(command, cwd=repo, capture_output=True, text=True, timeout=600)
            failure = "" if done.returncode == 0 and archive.is_file() else done.stderr[-2000:]
        except subprocess.TimeoutExpired:
            # Its driver exits with it: the driver ends when its stdin (the child's pipe) closes.
            failure = "not made within 600 s"
        if failure:
            print(f"JVM class archive not made (drivers start without it): {failure}")
            return None
    return driver_options(archive)


if __name__ == "__main__":
    build(Path(sys.argv[1]), Path(sys.argv[2]))
