"""Engines started the way a profile starts them, including every bad setting a user can give.

Each bad setting must end in one :class:`EngineError` naming the profile setting to fix, within
seconds, with nothing left running or half-created.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
import zipfile
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest
from pyspark.sql import Row

from dbt.adapters.dyntable.engines import start_engine
from dbt.adapters.dyntable.engines.base import EngineError
from dbt.adapters.dyntable.engines.connect import ConnectEngine
from dbt.adapters.dyntable.engines.embedded import EmbeddedEngine
from dbt.adapters.dyntable.engines.isolated import IsolatedServer
from dbt.adapters.dyntable.engines.jvm import JvmSparkEngine
from dbt.adapters.dyntable.engines.jvm_launch import CONNECT_MODE_VARIABLES, delta_version
from tests.functional.engine_probe import probe_from_another_process
from tests.functional.profiles import spark_jars_folder

pytestmark = pytest.mark.jvm_ci

#: Tests that open a Spark Connect session in this process (an embedded engine, a connect client):
#: PySpark then turns the whole process to Spark Connect, beside which the JVM engine cannot run,
#: so they run in the embedded profile's pytest process only.
in_connect_process = pytest.mark.skip_profile(
    "spark_session",
    reason="opens a Spark Connect session in the test process: runs in the embedded profile's process",
)

# -- factory ------------------------------------------------------------------------------------


def test_unknown_method_lists_the_accepted_ones(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="'embedded', 'session', 'connect'") as error:
        start_engine("thrift", warehouse=tmp_path)
    assert "`method`" in str(error.value)
    assert not any(tmp_path.iterdir())


def test_connect_without_url_names_connect_url(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="connect_url"):
        start_engine("connect", warehouse=tmp_path)


@in_connect_process
def test_factory_starts_the_embedded_engine(tmp_path: Path) -> None:
    engine = start_engine("embedded", warehouse=tmp_path / "wh")
    try:
        assert isinstance(engine, EmbeddedEngine)
        assert engine.spark.sql("SELECT 40 + 2 AS answer").collect()[0]["answer"] == 42
    finally:
        engine.stop()
    engine.stop()  # stopping twice is allowed


# -- embedded engine ----------------------------------------------------------------------------


def test_embedded_warehouse_not_writable_names_warehouse(tmp_path: Path) -> None:
    # Below a regular file no directory can be made, whoever runs the test (root ignores modes).
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    with pytest.raises(EngineError, match="`warehouse`"):
        EmbeddedEngine(blocker / "warehouse").start()


def test_embedded_port_taken_names_port(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(EngineError, match="`port`"):
            EmbeddedEngine(tmp_path / "wh", port=port).start()


@in_connect_process
def test_embedded_listens_on_loopback_only_when_its_port_is_named(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    engine = EmbeddedEngine(tmp_path / "wh", port=port).start()
    try:
        assert engine.address == f"127.0.0.1:{port}"
    finally:
        engine.stop()


#: Connecting to the engine's socket and to its port number on this machine's loopback.
CONNECTS = """
import socket, sys
for family, address in ((socket.AF_UNIX, sys.argv[1]), (socket.AF_INET, ("127.0.0.1", int(sys.argv[2])))):
    with socket.socket(family) as probe:
        try:
            probe.connect(address)
            print("ACCEPTED")
        except OSError:
            print("refused")
"""
SYSTEM_PYTHON = "/usr/bin/python3"


@in_connect_process
def test_embedded_engine_refuses_every_other_process(tmp_path: Path) -> None:
    """Sail's server has no authentication: it runs where only this process reaches it
    (engines/isolated.py). A probe from another process of the same user, and of another user,
    reads and writes nothing."""
    engine = EmbeddedEngine(tmp_path / "wh").start()
    try:
        server = engine._server
        if not isinstance(server, IsolatedServer):
            pytest.fail(f"this system allows no unprivileged user namespaces: {engine.address}")
        engine.execute("CREATE TABLE kept (a INT) USING delta")
        engine.execute("INSERT INTO kept VALUES (1)")
        location = engine.table_location("default", "kept")
        said = probe_from_another_process(server, engine.port, str(location))
        assert len(said) == 3 and all(line.startswith("refused") for line in said), said
        if os.getuid() == 0 and Path(SYSTEM_PYTHON).exists():
            # Another user, where this test may switch to one (this project's interpreter may lie
            # where that user cannot read it): the kernel refuses it the socket and the port.
            other = subprocess.run(
                [SYSTEM_PYTHON, "-c", CONNECTS, server.socket_path, str(engine.port)],
                capture_output=True,
                text=True,
                timeout=60,
                user="nobody",
                group="nogroup",
            )
            assert other.stdout.split() == ["refused", "refused"], other.stdout + other.stderr
        assert engine.spark.sql("SELECT a FROM kept").collect() == [Row(a=1)]
    finally:
        engine.stop()


@in_connect_process
def test_two_embedded_engines_in_one_process_keep_their_own_sessions(tmp_path: Path) -> None:
    first = EmbeddedEngine(tmp_path / "one").start()
    second = EmbeddedEngine(tmp_path / "two").start()
    try:
        assert first.spark is not second.spark
        first.execute("CREATE TABLE only_in_one (a INT) USING delta")
        assert first.spark.catalog.tableExists("only_in_one")
        assert not second.spark.catalog.tableExists("only_in_one")
    finally:
        second.stop()
        first.stop()


ROOT = Path(__file__).resolve().parents[2]


def _run_python(code: str, inherited: Optional[Dict[str, str]] = None) -> str:
    """Run ``code`` in a fresh Python, without the Spark Connect mode this process may be in
    unless ``inherited`` passes some of its variables on."""
    env = {k: v for k, v in os.environ.items() if k not in CONNECT_MODE_VARIABLES}
    env.update(inherited or {})
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


@in_connect_process
def test_a_query_sail_cannot_plan_names_the_rewrites(tmp_path: Path) -> None:
    """A Sail gap (test_engine_conformance.py, test_window_ordered_by_a_window_over_one_row) fails
    with Sail's planner error and what to write instead; when Sail plans it, this test fails and
    the hint goes."""
    from dbt_common.exceptions import DbtRuntimeError

    from dbt.adapters.dyntable.connections import EngineCursor

    engine = EmbeddedEngine(tmp_path / "wh").start()
    try:
        engine.execute("CREATE SCHEMA app")
        engine.execute("CREATE TABLE app.t (k INT, v INT, s STRING) USING delta")
        engine.execute("INSERT INTO app.t VALUES (1, 2, 'a'), (2, 3, 'b')")
        one_row = "SELECT count(*) AS k, sum(v) AS v, max(s) AS s FROM app.t"
        ranked = f"SELECT k, dense_rank() OVER (PARTITION BY s ORDER BY k) AS v, s FROM ({one_row}) AS g"
        query = f"SELECT k, v, s, rank() OVER (PARTITION BY k ORDER BY v) AS w FROM ({ranked}) AS r"
        with pytest.raises(DbtRuntimeError) as failed:  # as a dbt table model builds it
            EngineCursor(engine).execute(f"CREATE TABLE app.ranked USING delta AS {query}")
        messages = [str(failed.value)]
        cursor = EngineCursor(engine)  # as `dbt show` runs it: planned when its rows are fetched
        with pytest.raises(DbtRuntimeError) as failed:
            cursor.execute(query)
            cursor.fetchall()
        messages.append(str(failed.value))
        for message in messages:
            assert "does not satisfy order requirements" in message
            assert "Put a filter between the aggregate and the windows" in message
            assert "run on Spark (method: session)" in message
    finally:
        engine.stop()


@in_connect_process
def test_a_server_that_dies_mid_run_fails_fast_with_one_clear_error(tmp_path: Path) -> None:
    from dbt_common.exceptions import DbtRuntimeError

    from dbt.adapters.dyntable.connections import EngineCursor

    engine = EmbeddedEngine(tmp_path / "wh").start()
    try:
        engine.execute("CREATE SCHEMA app")
        engine._server.stop()  # what a crashed server leaves: nothing listening
        started = time.monotonic()
        with pytest.raises(DbtRuntimeError, match="embedded engine .* stopped responding"):
            EngineCursor(engine).execute("SELECT 1")
        assert time.monotonic() - started < 30  # not Spark Connect's ten minutes of retries
    finally:
        engine.stop()


def test_a_second_process_sees_tables_views_and_history(tmp_path: Path) -> None:
    warehouse = tmp_path / "shared"
    _run_python(
        f"""
        from pathlib import Path
        from dbt.adapters.dyntable.engines.embedded import EmbeddedEngine
        engine = EmbeddedEngine(Path({str(warehouse)!r})).start()
        engine.execute("CREATE SCHEMA sales")
        engine.execute("CREATE TABLE sales.orders (id INT, amount INT) USING delta")
        engine.spark.sql("INSERT INTO sales.orders VALUES (1, 10), (2, 20)").collect()
        engine.spark.sql("UPDATE sales.orders SET amount = 0 WHERE id = 1").collect()
        engine.execute("CREATE TABLE sales.totals USING delta AS SELECT sum(amount) AS total FROM sales.orders")
        engine.execute("CREATE VIEW sales.big AS SELECT id FROM sales.orders WHERE amount > 5")
        engine.stop()
        print("written")
        """
    )
    seen = json.loads(
        _run_python(
            f"""
            import json
            from pathlib import Path
            from dbt.adapters.dyntable.engines.embedded import EmbeddedEngine
            engine = EmbeddedEngine(Path({str(warehouse)!r})).start()
            sql = lambda q: [list(r) for r in engine.spark.sql(q).collect()]
            print(json.dumps({{
                "now": sql("SELECT id, amount FROM sales.orders ORDER BY id"),
                "v1": sql("SELECT id, amount FROM sales.orders VERSION AS OF 1 ORDER BY id"),
                "totals": sql("SELECT total FROM sales.totals"),
                "view": sql("SELECT id FROM sales.big"),
                "columns": [[f.name, f.nullable] for f in engine.spark.table("sales.totals").schema.fields],
            }}))
            engine.stop()
            """
        )
    )
    assert seen == {
        "now": [[1, 0], [2, 20]],
        "v1": [[1, 10], [2, 20]],
        "totals": [[20]],
        "view": [[2]],
        "columns": [["total", True]],
    }


def test_catalog_entries_are_remembered_until_the_catalog_changes(engine: Any, tmp_path: Path) -> None:
    """What the engine remembers of its catalog (docs/ARCHITECTURE.md, "Cost of a refresh") is
    what the catalog says: a table's location, a view's text. A statement run through the engine
    that changes the catalog forgets it; a change made behind its back is seen once the batch
    asks afresh (``forget_catalog``)."""
    from dbt.adapters.dyntable.engines.base import Engine

    schema = "catalog_memo"
    engine.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    try:
        engine.execute(f"CREATE TABLE {schema}.t (k BIGINT) USING delta")
        engine.execute(f"CREATE VIEW {schema}.v AS SELECT k + 1 AS k1 FROM {schema}.t")
        first = engine.table_location(schema, "t")
        assert first is not None and Path(first.removeprefix("file:")).name == "t"
        keys = ("Type", "Location", "View Text")
        for name in ("t", "v", "missing"):
            entry, asked = engine.catalog_entry(schema, name), Engine._catalog_entry(engine, schema, name)
            assert {k: entry.get(k) for k in keys} == {k: asked.get(k) for k in keys}
        assert "k + 1" in (engine.view_definition(schema, "v") or "")
        assert engine.catalog_entry(schema, "missing") == {}

        elsewhere = tmp_path / "elsewhere"
        engine.execute(f"DROP TABLE {schema}.t")
        engine.execute(f"CREATE TABLE {schema}.t (k BIGINT) USING delta LOCATION '{elsewhere}'")
        assert Path((engine.table_location(schema, "t") or "").removeprefix("file:")) == elsewhere

        engine.spark.sql(f"DROP TABLE {schema}.t").collect()  # behind the engine's back
        assert engine.table_location(schema, "t") is not None
        engine.forget_catalog()
        assert engine.table_location(schema, "t") is None
    finally:
        engine.execute(f"DROP SCHEMA {schema} CASCADE")


def test_a_query_comes_to_this_process_as_toarrow_gives_it(engine: Any) -> None:
    """``Engine.arrow`` (docs/ARCHITECTURE.md, "Applying"), one request on the embedded engine,
    gives a query's rows with the types ``DataFrame.toArrow()`` gives them, no rows included.
    (Their nullability may differ: the run may know a column holds no NULL where the analysis
    before it did not.)"""
    query = (
        "SELECT CAST(1 AS BIGINT) AS n, 'a' AS s, CAST(NULL AS STRING) AS none, "
        "CAST(1.5 AS DECIMAL(10, 2)) AS d, TIMESTAMP '2024-01-01 12:00:00' AS ts, "
        "DATE '2024-01-02' AS day, named_struct('a', 1, 'b', 'x') AS st, array('a', 'b') AS arr, "
        "map('k', 1) AS m"
    )
    for statement in (query, f"SELECT * FROM ({query}) AS q WHERE n < 0"):
        expected = engine.execute(statement).toArrow()
        rows = engine.arrow(statement)
        assert [(f.name, f.type) for f in rows.schema] == [(f.name, f.type) for f in expected.schema]
        assert rows.to_pylist() == expected.to_pylist()


def test_dataframe_debugging_is_off(engine: Any) -> None:
    """PySpark's DataFrame debugging would record a call site at every DataFrame function a
    refresh calls (``engines.base.DATAFRAME_DEBUGGING``): the engines start with it off."""
    from dbt.adapters.dyntable.engines.base import DATAFRAME_DEBUGGING

    assert engine.spark.conf.get(DATAFRAME_DEBUGGING) == "false"


def test_interrupt_cancels_the_running_query_and_refuses_statements_until_resumed(engine: Any) -> None:
    """Ctrl-C under dbt (docs/ARCHITECTURE.md, "Interrupting a run"): dbt cancels its connections,
    the engine cancels the query in flight (a trillion rows: it would run for an hour), says it
    was interrupted, and refuses new statements until the invocation ends."""
    from dbt.adapters.dyntable.engines.base import INTERRUPTED

    planned = threading.Event()
    outcome: Dict[str, BaseException] = {}

    def long_query() -> None:
        query = engine.execute(
            "SELECT sum(hash(a.id, b.id)) AS h FROM range(1000000) a CROSS JOIN range(1000000) b"
        )
        planned.set()
        try:
            query.collect()
        except Exception as exc:  # noqa: BLE001 - what the interrupt makes of it is the test
            outcome["error"] = exc

    worker = threading.Thread(target=long_query)
    worker.start()
    try:
        assert planned.wait(60)
        started = time.monotonic()
        # again until the query has reached the engine: an interrupt before that cancels nothing
        while worker.is_alive() and time.monotonic() - started < 60:
            engine.interrupt()
            worker.join(0.2)
        assert not worker.is_alive(), "the query was not cancelled"
        assert engine.failure_message(outcome["error"]) == INTERRUPTED
        with pytest.raises(EngineError, match="interrupted"):
            engine.execute("SELECT 1")
    finally:
        engine.resume()
        worker.join()
    assert engine.execute("SELECT 1 AS one").collect()[0]["one"] == 1


def test_tables_with_array_map_and_struct_columns_re_attach(tmp_path: Path) -> None:
    warehouse = tmp_path / "nested"
    _run_python(
        f"""
        from pathlib import Path
        from dbt.adapters.dyntable.engines.embedded import EmbeddedEngine
        engine = EmbeddedEngine(Path({str(warehouse)!r})).start()
        engine.execute("CREATE SCHEMA app")
        engine.execute("CREATE TABLE app.events (id INT, tags ARRAY<STRING>, attrs MAP<STRING, INT>, "
                       "point STRUCT<x: INT, ys: ARRAY<INT>>) USING delta")
        engine.execute("INSERT INTO app.events VALUES (1, array('a', 'b'), map('k', 1), named_struct('x', 1, 'ys', array(2, 3)))")
        engine.execute("CREATE TABLE app.tags USING delta AS SELECT id, tags FROM app.events")
        engine.stop()
        print("written")
        """
    )
    seen = json.loads(
        _run_python(
            f"""
            import json
            from pathlib import Path
            from dbt.adapters.dyntable.engines.embedded import EmbeddedEngine
            engine = EmbeddedEngine(Path({str(warehouse)!r})).start()
            events = engine.spark.sql("SELECT id, tags, attrs['k'] AS k, point.ys AS ys FROM app.events").collect()
            tags = engine.spark.sql("SELECT tags FROM app.tags").collect()
            print(json.dumps({{"events": [list(r) for r in events], "tags": [list(r) for r in tags]}}))
            engine.stop()
            """
        )
    )
    assert seen == {"events": [[1, ["a", "b"], 1, [2, 3]]], "tags": [[["a", "b"]]]}


# -- connect engine -----------------------------------------------------------------------------


@pytest.fixture
def connect_server() -> Iterator[str]:
    """A Spark Connect server on 127.0.0.1 (Sail), stopped after the test."""
    from pysail.spark import SparkConnectServer

    server = SparkConnectServer("127.0.0.1", 0)
    server.start(background=True)
    host, port = server.listening_address
    yield f"sc://{host}:{port}"
    server.stop()


@in_connect_process
def test_connect_engine_runs_queries(connect_server: str, tmp_path: Path) -> None:
    engine = start_engine("connect", warehouse=tmp_path, connect_url=connect_server)
    try:
        assert isinstance(engine, ConnectEngine)
        assert not engine.capabilities.change_data_feed
        assert engine.spark.sql("SELECT 1 AS one").collect()[0]["one"] == 1
    finally:
        engine.stop()


@pytest.mark.parametrize("url", ["http://127.0.0.1:15002", "127.0.0.1:15002", "sc://"])
def test_connect_bad_url_names_connect_url(url: str) -> None:
    with pytest.raises(EngineError, match="`connect_url`"):
        ConnectEngine(url).start()


def test_connect_nothing_listening_fails_fast() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # free once closed: nothing listens there
    started = time.monotonic()
    with pytest.raises(EngineError, match="connect_url"):
        ConnectEngine(f"sc://127.0.0.1:{port}").start()
    assert time.monotonic() - started < 10


# -- JVM engine: what can be checked without Delta's jars --------------------------------------


def spark_drivers() -> List[int]:
    """Pids of Spark drivers (SparkSubmit JVMs) that are children of this process."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and b"SparkSubmit" in cmdline:
            pids.append(int(stat.parent.name))
    return pids


needs_proc = pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="needs Linux /proc to see child JVMs"
)


def test_jvm_without_java_says_install_java_or_set_java_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(EngineError, match="JAVA_HOME") as error:
        JvmSparkEngine(tmp_path / "wh").start()
    assert "Java 17" in str(error.value)
    assert not (tmp_path / "wh").exists()


def test_jvm_java_home_without_java_names_java_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    with pytest.raises(EngineError, match="JAVA_HOME is set to .*no-jdk.* no bin/java"):
        JvmSparkEngine(tmp_path / "wh").start()


def test_jvm_spark_jars_missing_folder_names_spark_jars(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="`spark_jars`.*not a folder"):
        JvmSparkEngine(tmp_path / "wh", spark_jars=tmp_path / "nowhere").start()
    assert not (tmp_path / "wh").exists()


def test_jvm_spark_jars_without_delta_names_spark_jars_and_the_jars(tmp_path: Path) -> None:
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "delta-spark_2.12-3.2.0.jar").write_bytes(b"")  # wrong Scala version for Spark 4
    with pytest.raises(EngineError) as error:
        start_engine("session", warehouse=tmp_path / "wh", spark_jars=jars)
    message = str(error.value)
    version = delta_version()
    assert "`spark_jars`" in message
    assert f"delta-spark_2.13-{version}.jar" in message and f"delta-storage-{version}.jar" in message
    assert not (tmp_path / "wh").exists()


def _fake_jar(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as jar:
        jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")


def start_jvm_in_own_process(arguments: str) -> Dict[str, Any]:
    """Start `JvmSparkEngine(<arguments>)` in a fresh Python process (this one may already hold
    a Spark Connect session, beside which PySpark cannot start a classic one) and report how it
    failed: the message, the seconds it took, and whether a JVM or PySpark state was left."""
    return json.loads(
        _run_python(
            f"""
            import json, time
            from pathlib import Path
            from pyspark import SparkContext
            from dbt.adapters.dyntable.engines.base import EngineError
            from dbt.adapters.dyntable.engines.jvm import JvmSparkEngine
            from tests.functional.test_engines import spark_drivers
            started = time.monotonic()
            try:
                JvmSparkEngine({arguments}).start()
                message = None
            except EngineError as exc:
                message = str(exc)
            print(json.dumps({{
                "message": message,
                "seconds": time.monotonic() - started,
                "drivers_left": spark_drivers(),
                "pyspark_reset": SparkContext._gateway is None and SparkContext._active_spark_context is None,
            }}))
            """
        )
    )


@needs_proc
def test_jvm_jars_that_are_not_delta_fail_at_start_and_leave_no_jvm(tmp_path: Path) -> None:
    jars = tmp_path / "jars"
    jars.mkdir()
    version = delta_version()
    _fake_jar(jars / f"delta-spark_2.13-{version}.jar")
    _fake_jar(jars / f"delta-storage-{version}.jar")
    outcome = start_jvm_in_own_process(f"Path({str(tmp_path / 'wh')!r}), spark_jars=Path({str(jars)!r})")
    assert outcome["message"] is not None and "`spark_jars`" in outcome["message"]
    assert "Delta Lake's classes are not on its classpath" in outcome["message"]
    assert outcome["drivers_left"] == []
    assert outcome["pyspark_reset"]


def test_jvm_refuses_to_share_a_process_with_spark_connect(
    embedded_engine: EmbeddedEngine, tmp_path: Path
) -> None:
    assert embedded_engine.spark.sql("SELECT 1 AS one").collect()
    with pytest.raises(EngineError, match="process of its own"):
        JvmSparkEngine(tmp_path / "wh", spark_jars=None).start()
    assert not (tmp_path / "wh").exists()


@pytest.mark.skip_profile("embedded", reason="starts JVM Spark with Delta's jars: runs in the JVM profile")
def test_jvm_starts_in_a_child_of_a_spark_connect_process(tmp_path: Path) -> None:
    """A process started by one that used Spark Connect (a scheduler, a benchmark) inherits its
    mode variables but holds no Connect session: the session engine starts there."""
    jars = spark_jars_folder()
    answer = _run_python(
        f"""
        from pathlib import Path
        from dbt.adapters.dyntable.engines.jvm import JvmSparkEngine
        jars = {str(jars) if jars else None!r}
        engine = JvmSparkEngine(Path({str(tmp_path / "wh")!r}), spark_jars=Path(jars) if jars else None).start()
        try:
            print(engine.execute("SELECT 40 + 2 AS answer").collect()[0]["answer"])
        finally:
            engine.stop()
        """,
        inherited={"SPARK_CONNECT_MODE_ENABLED": "1", "SPARK_REMOTE": "sc://127.0.0.1:15002"},
    )
    assert answer == "42"


@pytest.mark.skip_profile("embedded", reason="starts JVM Spark with Delta's jars: runs in the JVM profile")
def test_a_jvm_driver_that_dies_mid_run_fails_with_one_clear_error(tmp_path: Path) -> None:
    """A driver JVM killed (as the system's out-of-memory killer kills the largest process) fails
    the statement after it with what happened and what to change, not a refused connection."""
    jars = spark_jars_folder()
    outcome = json.loads(
        _run_python(
            f"""
            import json
            from pathlib import Path
            from dbt_common.exceptions import DbtRuntimeError
            from dbt.adapters.dyntable.connections import EngineCursor
            from dbt.adapters.dyntable.engines.jvm import JvmSparkEngine
            jars = {str(jars) if jars else None!r}
            engine = JvmSparkEngine(Path({str(tmp_path / "wh")!r}), spark_jars=Path(jars) if jars else None).start()
            try:
                engine.execute("SELECT 1").collect()
                engine._proc.kill()
                engine._proc.wait()
                try:
                    EngineCursor(engine).execute("SELECT 2")
                    message = None
                except DbtRuntimeError as exc:
                    message = str(exc)
            finally:
                engine.stop()
            print(json.dumps({{"message": message}}))
            """
        )
    )
    message = outcome["message"]
    assert message is not None and "Spark's driver JVM exited (killed by signal 9" in message, message
    assert "`spark.driver.memory`" in message and "server_side_parameters" in message
    assert "Connection refused" not in message


def _ivy_settings(tmp_path: Path, repository_root: str) -> Path:
    """Ivy settings whose only repository is `repository_root`, with a cache of their own, so
    the test gives the same result with or without network access and a warm Ivy cache."""
    settings = tmp_path / "ivysettings.xml"
    settings.write_text(
        f"""<ivysettings>
  <settings defaultResolver="only"/>
  <caches defaultCacheDir="{tmp_path / "ivy-cache"}"/>
  <resolvers><ibiblio name="only" m2compatible="true" root="{repository_root}"/></resolvers>
</ivysettings>"""
    )
    return settings


def _ivy_conf(settings: Path, tmp_path: Path) -> str:
    return repr({"spark.jars.ivySettings": str(settings), "spark.jars.ivy": str(tmp_path / "ivy")})


@needs_proc
def test_jvm_unresolvable_maven_says_set_spark_jars(tmp_path: Path) -> None:
    empty_repository = tmp_path / "repository"
    empty_repository.mkdir()
    settings = _ivy_settings(tmp_path, empty_repository.as_uri() + "/")
    outcome = start_jvm_in_own_process(
        f"Path({str(tmp_path / 'wh')!r}), spark_conf={_ivy_conf(settings, tmp_path)}"
    )
    message = outcome["message"]
    assert message is not None and "could not be resolved from Maven" in message
    assert "`spark_jars`" in message and f"delta-spark_2.13-{delta_version()}.jar" in message
    assert outcome["seconds"] < 60
    assert outcome["drivers_left"] == [] and outcome["pyspark_reset"]
    assert not (tmp_path / "wh").exists()


@pytest.fixture
def silent_repository() -> Iterator[str]:
    """An HTTP 'repository' on 127.0.0.1 that accepts connections and never answers: a network
    that swallows requests, as a firewall dropping packets does."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: List[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/"
    stop.set()
    thread.join()
    for connection in held:
        connection.close()
    server.close()


@needs_proc
def test_jvm_start_is_bounded_when_maven_hangs(tmp_path: Path, silent_repository: str) -> None:
    settings = _ivy_settings(tmp_path, silent_repository)
    outcome = start_jvm_in_own_process(
        f"Path({str(tmp_path / 'wh')!r}), spark_conf={_ivy_conf(settings, tmp_path)}, start_timeout=8"
    )
    message = outcome["message"]
    assert message is not None and "did not start within 8 s" in message
    assert "`spark_jars`" in message
    assert outcome["seconds"] < 20
    assert outcome["drivers_left"] == [] and outcome["pyspark_reset"]
