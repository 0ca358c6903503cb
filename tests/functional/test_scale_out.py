"""Scale-out on existing distributed engines, started here from pyspark's own jars and scripts.

* A Spark standalone cluster (a master and a worker, each a JVM of its own) runs the shop's
  dynamic tables (`dbt run`, the runner after data streamed in, every dynamic table checked
  against its query) through ``method: session`` with ``master: spark://...``: the project's
  ``cluster`` target.
* A Spark Connect server (pyspark's ``spark-connect`` jar, with Delta's jars) serves
  ``method: connect``: dbt creates and incrementally refreshes a dynamic table through it.

Everything started here listens on 127.0.0.1 only (checked from /proc) and is stopped by the
fixture that started it, failed test or not. These tests run JVM Spark with Delta, so they run in
the ``--profile spark_session`` process and skip where Delta's jars cannot be had.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple

import pytest
import yaml

from dbt.adapters.dyntable.dynamic_table.metadata import MetadataStore
from tests.functional.profiles import SPARK_JARS_ENV, spark_jars_folder

REPO = Path(__file__).resolve().parents[2]
PROJECT = REPO / "integration_project"
DBT = Path(sys.executable).with_name("dbt")
BUILD_OUTPUT = ("target", "logs", "dbt_packages", ".dyntable", ".user.yml")
START_TIMEOUT_SECS = 180


def spark_home() -> Path:
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Started:
    """A process started here in a session of its own (its children included in its group)."""

    name: str
    process: subprocess.Popen
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_for(self, text: str, timeout: float = START_TIMEOUT_SECS) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.output():
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.5)
        raise AssertionError(f"{self.name} did not say {text!r}:\n{self.output()[-4000:]}")

    def stop(self) -> None:
        """End the process group: SIGTERM (Spark's daemons stop what they started), then SIGKILL
        whatever of the group is left (a worker's executors, a daemon that did not stop)."""
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()


def start(name: str, command: Sequence[str], log: Path, env: Dict[str, str]) -> Started:
    handle = log.open("wb")
    try:
        process = subprocess.Popen(
            list(command),
            stdout=handle,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    finally:
        handle.close()
    return Started(name, process, log)


def spark_env() -> Dict[str, str]:
    """Spark's daemons bind to SPARK_LOCAL_IP, their web UIs included (else 0.0.0.0)."""
    env = dict(os.environ, SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1")
    for variable in (
        "SPARK_CONNECT_MODE_ENABLED",
        "SPARK_REMOTE",
        "SPARK_LOCAL_REMOTE",
        "PYSPARK_SUBMIT_ARGS",
    ):
        env.pop(variable, None)
    return env


# -- what listens ---------------------------------------------------------------------------------

LOOPBACK = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}


def process_tree(root: int) -> Set[int]:
    children: Dict[int, List[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    tree, pending = set(), [root]
    while pending:
        pid = pending.pop()
        if pid not in tree:
            tree.add(pid)
            pending.extend(children.get(pid, []))
    return tree


def listening(pids: Set[int]) -> List[Tuple[str, int]]:
    """(address in /proc hex, port) of every listening TCP socket the processes hold."""
    inodes: Set[str] = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address, port = fields[1].split(":")
                found.append((address, int(port, 16)))
    return found


def assert_loopback_only(*started: Started) -> None:
    pids = set().union(*(process_tree(s.process.pid) for s in started))
    sockets = listening(pids)
    assert sockets, "found no listening socket: the check would prove nothing"
    assert [s for s in sockets if s[0] not in LOOPBACK] == [], sockets


# -- fixtures ---------------------------------------------------------------------------------------


def require_jvm_profile(request: pytest.FixtureRequest) -> None:
    if request.config.getoption("--profile") != "spark_session":
        pytest.skip("runs JVM Spark with Delta: tested in the spark_session profile's process")


@pytest.fixture(scope="module")
def standalone_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Tuple[str, List[Started], Path]]:
    """A standalone master and one worker (2 cores, 2 GB) on 127.0.0.1; its URL, processes and
    the worker's work folder (one folder per application whose executors it ran)."""
    require_jvm_profile(request)
    request.getfixturevalue("engine")  # skips with the reason where Delta's jars cannot be had
    logs = tmp_path_factory.mktemp("standalone")
    spark_class = str(spark_home() / "bin" / "spark-class")
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    started: List[Started] = []
    try:
        master = start(
            "master",
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(free_port()),
            ],
            logs / "master.log",
            spark_env(),
        )
        started.append(master)
        master.wait_for("ALIVE")
        work = logs / "work"
        worker = start(
            "worker",
            [
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                url,
                "--host",
                "127.0.0.1",
                "--port",
                str(free_port()),
                "--webui-port",
                str(free_port()),
                "--cores",
                "2",
                "--memory",
                "2g",
                "--work-dir",
                str(work),
            ],
            logs / "worker.log",
            spark_env(),
        )
        started.append(worker)
        worker.wait_for("Successfully registered with master")
        yield url, started, work
    finally:
        for process in reversed(started):
            process.stop()


@pytest.fixture(scope="module")
def connect_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Tuple[str, Started, Path]]:
    """Spark's own Spark Connect server (pyspark's spark-connect jar) with Delta, on 127.0.0.1;
    its URL, process and warehouse."""
    require_jvm_profile(request)
    request.getfixturevalue("engine")
    from dbt.adapters.dyntable.engines.jvm_launch import DELTA_CONF, delta_jars, delta_version

    root = tmp_path_factory.mktemp("connect")
    warehouse = root / "warehouse"
    port = free_port()
    jars = spark_jars_folder()
    delta = (
        ["--jars", ",".join(str(jar) for jar in delta_jars(jars))]
        if jars is not None
        else ["--packages", f"io.delta:delta-spark_2.13:{delta_version()}"]
    )
    conf = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.sql.warehouse.dir": str(warehouse),
        "spark.sql.ansi.enabled": "false",
        **DELTA_CONF,
    }
    command = [
        str(spark_home() / "bin" / "spark-submit"),
        "--master",
        "local[2]",
        "--class",
        "org.apache.spark.sql.connect.service.SparkConnectServer",
        *delta,
    ]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    server = start("Spark Connect server", [*command, "spark-internal"], root / "server.log", spark_env())
    try:
        deadline = time.monotonic() + START_TIMEOUT_SECS
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=2).close()
                break
            except OSError as refused:
                if server.process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(
                        f"the Spark Connect server did not start:\n{server.output()[-4000:]}"
                    ) from refused
                time.sleep(1)
        yield f"sc://127.0.0.1:{port}", server, warehouse
    finally:
        server.stop()


# -- the standalone cluster -------------------------------------------------------------------------


#: A join, a group-by over it and the DTs they read: the shop's DTs a cluster test builds.
CLUSTER_SELECTION = "+daily_revenue +customer_stats"


def test_the_shop_refreshes_on_a_standalone_cluster(standalone_cluster, tmp_path: Path) -> None:
    """The project's ``cluster`` target: dbt creates the shop's DTs on the cluster, the runner
    refreshes them incrementally there after changes stream in, and each equals its query. (The
    whole demo, on one machine, is tests/functional/test_demo.py and test_integration_project.py.)
    Eight minutes on two cores, every task shipped to an executor: in the full JVM set, not CI's."""
    url, daemons, work = standalone_cluster
    project = tmp_path / "integration_project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns(*BUILD_OUTPUT))
    env = dict(spark_env(), DYNTABLE_SPARK_MASTER=url, DBT_SEND_ANONYMOUS_USAGE_STATS="false")
    env.pop("SPARK_HOME")
    jars = spark_jars_folder()
    if jars is not None:
        env[SPARK_JARS_ENV] = str(jars)

    def run(*command: str) -> None:
        done = subprocess.run(
            list(command), cwd=project, env=env, capture_output=True, text=True, timeout=900
        )
        assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]

    warehouse = ["--warehouse", str(project / ".dyntable" / "warehouse")]
    target = ["--profiles-dir", str(project), "--target", "cluster"]
    run(sys.executable, "generator.py", "init", *warehouse)
    run(str(DBT), "run", "--select", CLUSTER_SELECTION, *target)
    run(sys.executable, "generator.py", "stream", "--seconds", "2", "--batches-per-second", "4", *warehouse)
    run(
        str(DBT.with_name("dyntable")),
        "run",
        "--once",
        "--select",
        CLUSTER_SELECTION,
        "--project-dir",
        str(project),
        *target,
    )

    store = MetadataStore(project / ".dyntable" / "warehouse" / "dyntable_meta", "dyntable_meta")
    latest = {name: store.history(name)[-1] for name in store.frontiers()}
    assert {"shop.daily_revenue", "shop.customer_stats"} <= set(latest), sorted(latest)
    assert latest["shop.daily_revenue"].refresh_action == "INCREMENTAL", latest["shop.daily_revenue"]
    checks = project_check(project, "cluster", env)
    assert sorted(c["name"] for c in checks) == sorted(latest)
    assert [(c["name"], c["detail"]) for c in checks if not c["ok"]] == []
    # The work ran on the cluster: the worker started executors for dbt, the runner and the
    # check, each application in a folder of its own.
    applications = sorted(p.name for p in work.iterdir()) if work.is_dir() else []
    assert len(applications) >= 3, applications
    assert_loopback_only(*daemons)


# -- the Spark Connect server -----------------------------------------------------------------------

CONNECT_MODEL = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}
select c.country, count(*) as orders, sum(o.amount) as revenue
from raw.orders as o join raw.customers as c on o.customer_id = c.customer_id
group by c.country
"""


def connect_sql(url: str, *statements: str) -> None:
    """Run statements through a Spark Connect client in a process of its own: this process runs
    classic PySpark, beside which PySpark cannot open a Spark Connect session."""
    code = textwrap.dedent(f"""
        from pyspark.sql import SparkSession
        spark = SparkSession.builder.remote({url!r}).create()
        for statement in {list(statements)!r}:
            spark.sql(statement).collect()
        spark.stop()
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]


# In the full JVM set, not its CI subset (2.2 minutes here beside the embedded suite). CI
# starts the connect engine against Sail's Spark Connect server (test_engines.py); a DT created
# and refreshed through dbt over `method: connect` is tested here only.
def test_connect_method_creates_and_refreshes_a_dynamic_table(connect_server, tmp_path: Path) -> None:
    url, server, warehouse = connect_server
    project = tmp_path / "connect_project"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text(
        "name: over_connect\nversion: '1.0'\nconfig-version: 2\nprofile: over_connect\n"
    )
    (project / "models" / "country_dt.sql").write_text(CONNECT_MODEL)
    target = {
        "type": "dyntable",
        "method": "connect",
        "host": url,
        "schema": "app",
        "threads": 1,
        "warehouse": str(warehouse),
    }
    (project / "profiles.yml").write_text(
        yaml.safe_dump({"over_connect": {"target": "dev", "outputs": {"dev": target}}})
    )
    connect_sql(
        url,
        "create schema if not exists raw",
        "create table raw.customers (customer_id bigint, country string) using delta",
        "create table raw.orders (order_id bigint, customer_id bigint, amount double) using delta",
        "insert into raw.customers values (1, 'GB'), (2, 'US'), (3, 'NL')",
        "insert into raw.orders values (1, 1, 10.0), (2, 2, 20.0), (3, 3, 30.0), (4, 1, 5.0)",
    )

    def dbt_run() -> None:
        done = subprocess.run(
            [str(DBT), "run", "--project-dir", str(project), "--profiles-dir", str(project)],
            capture_output=True,
            text=True,
            timeout=600,
            env=dict(os.environ, DBT_SEND_ANONYMOUS_USAGE_STATS="false"),
        )
        assert done.returncode == 0, done.stdout[-4000:]

    dbt_run()
    connect_sql(
        url,
        "insert into raw.orders values (5, 2, 7.0), (6, 3, 1.0)",
        "delete from raw.orders where order_id = 1",
        "update raw.customers set country = 'US' where customer_id = 3",
    )
    dbt_run()

    store = MetadataStore(warehouse / "dyntable_meta", "dyntable_meta")
    actions = [(h.refresh_action, h.state) for h in store.history("app.country_dt")]
    assert actions == [("REINITIALIZE", "SUCCEEDED"), ("INCREMENTAL", "SUCCEEDED")]
    checks = project_check(project)
    assert [(c["name"], c["ok"], c["detail"]) for c in checks] == [("app.country_dt", True, "equal")]
    assert_loopback_only(server)


def project_check(
    project: Path, target: Optional[str] = None, env: Optional[Dict[str, str]] = None
) -> List[Dict[str, object]]:
    environment = os.environ if env is None else env
    done = subprocess.run(
        [sys.executable, "-m", "tests.functional.project_check", str(project), *([target] if target else [])],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={k: v for k, v in environment.items() if k not in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
