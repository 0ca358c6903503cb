"""Exactly-once apply under SIGKILL at every step of a refresh (docs/ARCHITECTURE.md, "Exactly once").

Each case runs `dbt run` in its own process with a failpoint armed, so the process dies at that
step with no cleanup; then a normal `dbt run` must recover by itself: the DT equals its query at
its data timestamp (no duplicated or missing rows) and the history says what happened.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dbt.adapters.dyntable.dynamic_table.failpoints import ENV
from dbt.adapters.dyntable.dynamic_table.metadata import MetadataStore
from dbt.adapters.dyntable.dynamic_table.verify import check_dvs
from dbt.adapters.dyntable.engines.embedded import EmbeddedEngine

DBT = str(Path(sys.executable).with_name("dbt"))

MODEL = """
{{{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='{mode}') }}}}
select c.country, count(*) as orders, sum(o.amount) as revenue
from raw.orders as o join raw.customers as c on o.customer_id = c.customer_id
group by c.country
"""


def write_project(root: Path, mode: str) -> None:
    (root / "models").mkdir(parents=True)
    (root / "dbt_project.yml").write_text(
        "name: crash\nversion: '1.0'\nconfig-version: 2\nprofile: crash\n"
    )
    (root / "profiles.yml").write_text(
        "crash:\n  target: dev\n  outputs:\n    dev:\n      type: dyntable\n"
        f"      schema: app\n      threads: 1\n      warehouse: {root / 'warehouse'}\n"
    )
    (root / "models" / "country_dt.sql").write_text(MODEL.format(mode=mode))


def dbt_run(root: Path, failpoint: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if failpoint:
        env[ENV] = failpoint
    return subprocess.run(
        [DBT, "run", "--project-dir", str(root), "--profiles-dir", str(root)],
        env=env, capture_output=True, text=True, timeout=300,
    )


def execute(root: Path, *statements: str) -> list:
    engine = EmbeddedEngine(root / "warehouse").start()
    try:
        results = [engine.execute(s).collect() for s in statements]
    finally:
        engine.stop()
    return results


def assert_dt_matches_query(root: Path) -> None:
    engine = EmbeddedEngine(root / "warehouse").start()
    try:
        check = check_dvs(engine, store_of(root), "app.country_dt")
    finally:
        engine.stop()
    assert check.ok, check.detail


def store_of(root: Path) -> MetadataStore:
    return MetadataStore(root / "warehouse" / "dyntable_meta", "dyntable_meta")


@pytest.mark.parametrize("mode", ["incremental", "full"])
@pytest.mark.parametrize(
    "failpoint, recovered_state",
    [
        ("after_intent", "CANCELLED"),  # the DT never committed: discard and redo
        ("after_apply", "SUCCEEDED"),  # the DT committed, the frontier did not: adopt it
        ("during_apply:0.02", None),  # either, depending on when the kill lands
    ],
)
def test_sigkill_at_each_step_recovers(tmp_path, mode, failpoint, recovered_state):
    write_project(tmp_path, mode)
    execute(
        tmp_path,
        "create schema raw",
        "create table raw.customers (customer_id bigint, country string) using delta",
        "create table raw.orders (order_id bigint, customer_id bigint, amount double) using delta",
        "insert into raw.customers values (1, 'GB'), (2, 'US'), (3, 'NL')",
        "insert into raw.orders values (1, 1, 10.0), (2, 2, 20.0), (3, 3, 30.0), (4, 1, 5.0)",
    )
    first = dbt_run(tmp_path)
    assert first.returncode == 0, first.stdout[-3000:]
    execute(
        tmp_path,
        "insert into raw.orders values (5, 2, 7.0), (6, 3, 1.0)",
        "delete from raw.orders where order_id = 1",
        "update raw.customers set country = 'US' where customer_id = 3",
    )

    killed = dbt_run(tmp_path, failpoint)
    assert killed.returncode == -signal.SIGKILL, killed.stdout[-3000:]

    recovered = dbt_run(tmp_path)
    assert recovered.returncode == 0, recovered.stdout[-3000:]
    assert_dt_matches_query(tmp_path)

    store = store_of(tmp_path)
    recovery = [h for h in store.history("app.country_dt") if h.refresh_trigger == "RECOVERY"]
    assert len(recovery) == 1, store.history("app.country_dt")
    if recovered_state:
        assert recovery[0].state == recovered_state
    assert recovery[0].state_message.startswith("recovered:")
