"""The dbt profile of the engine under test, for in-process dbt and for dbt in subprocesses.

``--profile`` (see tests/conftest.py) names the engine a pytest process tests: ``embedded`` (Sail
in-process) or ``spark_session`` (JVM Spark with delta-spark). Every functional test reaches its
engine through the target built here, so one pytest process tests one engine:

* in-process dbt (dbt's ``project`` fixture) and the tests that drive an engine directly share the
  session's one engine (the ``engine`` fixture in tests/functional/conftest.py);
* tests that run dbt, the ``dyntable`` CLI or the demo in subprocesses write this target into
  the project's profiles.yml, on a warehouse of their own.

Delta's jars for the JVM engine come from the folder named by ``DYNTABLE_SPARK_JARS`` or, where it
is unset, from Maven.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Optional

import yaml

SPARK_JARS_ENV = "DYNTABLE_SPARK_JARS"
PROFILE_METHODS = {"embedded": "embedded", "spark_session": "session"}

#: Spark settings of the JVM engine under test. An INSERT ... VALUES writes one file, as it does
#: on the embedded engine, instead of one per core: tests that build a file layout (an update
#: rewriting a file that holds other rows, a delete leaving a deletion vector) then get the same
#: layout on both engines, whatever the machine's core count. The rest size Spark for the tests'
#: tables of a few rows, which are queried once or twice each: operators are not fused into Java
#: compiled for each new query, plans are not re-optimized between stages, and a shuffle has two
#: partitions. The JVM suite's operator tests took 104 s with them where they took 126 (121 with
#: the small shuffle alone). Expressions are interpreted, not compiled to Java per query (Spark's
#: testing-only `spark.sql.codegen.factoryMode`): the apply and operator tests took 188 s where
#: they took 216, in 12% less CPU. Spark's interpreted path cannot decode `catalog.listTables()`'s
#: rows, so the tests list tables with `SHOW TABLES`. They change how fast Spark runs, never what
#: it computes; the benchmarks run Spark's defaults.
JVM_TEST_CONF = {
    "spark.sql.leafNodeDefaultParallelism": "1",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
#: The driver JVM of a dbt process a test starts, which lives for seconds on small tables, compiles
#: with C1 only and collects with one thread: C2's compiler threads and a parallel collector cost
#: it more CPU than they save (the JVM tests of crashes, SIGTERM and races: 343 s of CPU where they
#: took 456, in the same wall time alone; CPU the other engine's half of the suite gets back). The
#: test process's own JVM, which lives for the whole run, keeps the defaults: with these flags its
#: Spark work ran slower. It changes how fast Spark runs, never what it computes.
SHORT_LIVED_JVM_CONF = {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
#: The test process's own driver, which holds every Delta snapshot and plan cache of a whole run:
#: in Spark's default 1 GB heap it kept 300-400 MB live after 6 minutes, and G1 ran a concurrent
#: cycle every 15 s (each started by a large allocation over its occupancy threshold; 14 s of
#: collection in 90). A larger heap leaves that threshold far above what it holds.
SESSION_JVM_CONF = {"spark.driver.memory": "3g"}


def spark_jars_folder() -> Optional[Path]:
    """The folder DYNTABLE_SPARK_JARS names (absolute), or None when it is unset."""
    value = os.environ.get(SPARK_JARS_ENV)
    return Path(value).expanduser().resolve() if value else None


def engine_target(
    profile: str,
    warehouse: Path,
    schema: str = "dyntable_functional",
    threads: int = 1,
    short_lived: bool = False,
    session: bool = False,
) -> Dict[str, Any]:
    """A dyntable profile target for the engine ``profile`` names, on ``warehouse``;
    ``short_lived``: for the dbt processes a test starts and stops; ``session``: for the test
    process's own engine, which lives for the whole run."""
    target: Dict[str, Any] = {
        "type": "dyntable",
        "method": PROFILE_METHODS[profile],
        "schema": schema,
        "threads": threads,
        "warehouse": str(warehouse),
    }
    if profile == "spark_session":
        jars = spark_jars_folder()
        if jars is not None:
            target["spark_jars"] = str(jars)
        lifetime = SHORT_LIVED_JVM_CONF if short_lived else SESSION_JVM_CONF if session else {}
        target["server_side_parameters"] = {**JVM_TEST_CONF, **lifetime}
    return target


def write_profiles(
    directory: Path, profile_name: str, target: Dict[str, Any], target_name: str = "dev"
) -> Path:
    """Write ``profiles.yml`` with one profile of one target into ``directory``."""
    path = directory / "profiles.yml"
    path.write_text(yaml.safe_dump({profile_name: {"target": target_name, "outputs": {target_name: target}}}))
    return path


def credentials(target: Dict[str, Any]):
    """The adapter's credentials for a target, as dbt builds them from profiles.yml."""
    from dbt.adapters.dyntable.connections import DyntableCredentials

    return DyntableCredentials.from_dict({k: v for k, v in target.items() if k not in ("type", "threads")})
