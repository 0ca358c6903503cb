"""integration_project, built twice by the real `dbt` command in separate processes, on the engine
under test (the project's `embedded` or `session` target, see its profiles.yml).

Each dbt process starts its own engine: what the second build (and a third, querying process)
finds of the first one's tables comes from the warehouse directory (and, on the JVM engine, its
metastore) alone. The shop's raw tables are written by generator.py with the `deltalake` package,
outside any engine. Delta history is read with the `deltalake` package, independently of the
engine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest
import yaml
from deltalake import DeltaTable

from tests.functional.profiles import JVM_TEST_CONF, SHORT_LIVED_JVM_CONF

REPO = Path(__file__).resolve().parents[2]
PROJECT = REPO / "integration_project"
DBT = Path(sys.executable).with_name("dbt")
#: What a previous local build may have left in the source project; never copied.
BUILD_OUTPUT = ("target", "logs", "dbt_packages", ".dyntable", ".user.yml")
DBT_TIMEOUT_SECS = 300

#: The project's profiles.yml target for each engine under test.
TARGETS = {"embedded": "embedded", "spark_session": "session"}

NEW_CUSTOMER = "6,Katherine Johnson,katherine@example.com,US,2024-03-09 08:00:00\n"
NEW_ORDER = "108,6,2024-03-09 09:30:00,completed,64.00\n"


def dbt(project: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, DBT_SEND_ANONYMOUS_USAGE_STATS="false", DBT_USE_COLORS="false")
    env.pop("DBT_LOG_PATH", None)  # dbt's test fixtures set it for in-process runs
    return subprocess.run(
        [str(DBT), *args, "--profiles-dir", str(project), "--target", project_target(project)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=DBT_TIMEOUT_SECS,
    )


def project_target(project: Path) -> str:
    return (project / ".target").read_text()


def check_every_dynamic_table(project: Path) -> List[Dict[str, Any]]:
    """Every DT against its query at its data timestamp, in a process of its own on the project's
    engine (the JVM engine's metastore serves one process at a time)."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.functional.project_check", str(project), project_target(project)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=DBT_TIMEOUT_SECS,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def failed_output(done: subprocess.CompletedProcess) -> str:
    """A failed dbt command's first failure in full (the cause; those after it often follow
    from it), then the end of its output."""
    first = done.stdout.find("Completed with")
    head = done.stdout[first : first + 5000] if first >= 0 else ""
    return f"{head}\n[...]\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


def build(project: Path) -> List[Dict[str, Any]]:
    """`dbt build` in a new process; its node results from run_results.json."""
    done = dbt(project, "build", "--write-json")
    assert done.returncode == 0, f"dbt build failed:\n{failed_output(done)}"
    results = json.loads((project / "target" / "run_results.json").read_text())["results"]
    assert results and all(r["status"] in ("success", "pass") for r in results), results
    return results


def show(project: Path, sql: str) -> List[Dict[str, Any]]:
    done = dbt(project, "--quiet", "show", "--inline", sql, "--output", "json")
    assert done.returncode == 0, f"dbt show failed:\n{failed_output(done)}"
    return json.loads(done.stdout[done.stdout.index("{") :])["show"]


def history(table: Path) -> List[str]:
    """The table's commit operations, oldest first."""
    return [
        entry["operation"] for entry in sorted(DeltaTable(str(table)).history(), key=lambda e: e["version"])
    ]


def generator(project: Path, *args: str) -> None:
    done = subprocess.run(
        [sys.executable, "generator.py", *args, "--warehouse", str(project / ".dyntable" / "warehouse")],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=DBT_TIMEOUT_SECS,
    )
    assert done.returncode == 0, done.stderr[-3000:]


def _size_spark_for_tests(profiles: Path, target: str) -> None:
    """The project's own target, with the Spark settings every JVM test's dbt process runs with
    (tests/functional/profiles.py): how fast Spark runs its small tables, never what it computes.
    With Spark's defaults (200 shuffle partitions a query, code compiled for each) the JVM
    suite's two builds took 272 s."""
    config = yaml.safe_load(profiles.read_text())
    output = config["integration_project"]["outputs"][target]
    output["server_side_parameters"] = {**JVM_TEST_CONF, **SHORT_LIVED_JVM_CONF}
    profiles.write_text(yaml.safe_dump(config))


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, dyntable_profile: str) -> Path:
    copy = tmp_path_factory.mktemp("integration") / "integration_project"
    shutil.copytree(PROJECT, copy, ignore=shutil.ignore_patterns(*BUILD_OUTPUT))
    target = TARGETS[dyntable_profile]
    (copy / ".target").write_text(target)
    if dyntable_profile == "spark_session":
        _size_spark_for_tests(copy / "profiles.yml", target)
    generator(copy, "init")  # the shop's raw Delta tables, as the demo starts
    return copy


@pytest.mark.jvm_ci
def test_two_builds_in_two_processes_share_the_warehouse(project: Path) -> None:
    shop = project / ".dyntable" / "warehouse" / "shop"

    first = build(project)
    assert {r["unique_id"].split(".")[-1] for r in first} >= {
        "raw_customers",
        "raw_orders",
        "customer_orders",
        "orders_daily",
        "customers_snapshot",
    }
    orders_daily_v1 = DeltaTable(str(shop / "orders_daily")).version()
    customer_orders_v1 = DeltaTable(str(shop / "customer_orders")).version()
    ops_after_first = history(shop / "orders_daily")
    assert "MERGE" not in ops_after_first

    # New data for the second build: a customer and an order on a day orders_daily has not seen.
    with (project / "seeds" / "raw_customers.csv").open("a") as handle:
        handle.write(NEW_CUSTOMER)
    with (project / "seeds" / "raw_orders.csv").open("a") as handle:
        handle.write(NEW_ORDER)

    build(project)

    # The incremental model was merged into, not re-created: its first-run history is still there.
    ops_after_second = history(shop / "orders_daily")
    assert ops_after_second[: len(ops_after_first)] == ops_after_first
    assert ops_after_second[len(ops_after_first) :] == ["MERGE"]
    daily = DeltaTable(str(shop / "orders_daily")).to_pyarrow_table().to_pylist()
    by_day = {str(row["order_date"]): row for row in daily}
    assert by_day["2024-03-09"]["order_count"] == 1
    assert len(by_day) == 8  # seven days from the first build, one merged in

    # A third process reads versions the first process wrote, through the engine.
    [counts] = show(
        project,
        "select"
        f" (select count(*) from shop.customer_orders version as of {customer_orders_v1}) as before,"
        " (select count(*) from shop.customer_orders) as now,"
        " (select count(*) from shop.orders_daily version as of 0) as daily_v0,"
        f" (select count(*) from shop.orders_daily version as of {orders_daily_v1}) as daily_v1",
    )
    expected_v0 = DeltaTable(str(shop / "orders_daily"), version=0).to_pyarrow_table().num_rows
    assert counts == {"before": 5, "now": 6, "daily_v0": expected_v0, "daily_v1": 7}


@pytest.mark.jvm_ci
def test_empty_seed_cells_load_as_null(project: Path) -> None:
    shop = project / ".dyntable" / "warehouse" / "shop"
    if not (shop / "raw_customers").is_dir():
        build(project)
    customers = {
        r["customer_id"]: r for r in DeltaTable(str(shop / "raw_customers")).to_pyarrow_table().to_pylist()
    }
    orders = {r["order_id"]: r for r in DeltaTable(str(shop / "raw_orders")).to_pyarrow_table().to_pylist()}
    assert customers[3]["email"] is None
    assert customers[1]["email"] == "ada@example.com"
    assert orders[104]["amount"] is None
    assert orders[100]["amount"] is not None and float(orders[100]["amount"]) == 120.5


def test_shop_dynamic_tables_equal_their_queries_after_streamed_changes(project: Path) -> None:
    """The shop's DTs after inserts, updates and deletes from the generator and a second dbt run.
    (In the full JVM set, not its CI subset: the demo's path, which the embedded suite runs.)"""
    from dbt.adapters.dyntable.dynamic_table.metadata import MetadataStore

    warehouse = project / ".dyntable" / "warehouse"
    if not (warehouse / "dyntable_meta").is_dir():
        build(project)
    generator(project, "stream", "--seconds", "4", "--batches-per-second", "4")
    done = dbt(project, "run", "--select", "shop")
    assert done.returncode == 0, failed_output(done)

    store = MetadataStore(warehouse / "dyntable_meta", "dyntable_meta")
    actions = {name: store.history(name)[-1].refresh_action for name in store.frontiers()}
    assert len(actions) == 9
    assert "INCREMENTAL" in actions.values(), actions
    checks = check_every_dynamic_table(project)
    assert sorted(c["name"] for c in checks) == sorted(actions)
    assert [(c["name"], c["detail"]) for c in checks if not c["ok"]] == []
