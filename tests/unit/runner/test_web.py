"""The live page's app without a browser or an engine: its JSON, /metrics in Prometheus' format
(parsed by prometheus_client's own parser), health, the actions and who may use them, over real
metadata tables in a temporary folder."""

from __future__ import annotations

import warnings
from datetime import datetime, timezone
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dbt.adapters.dyntable.dynamic_table.metadata import MetadataStore
from dbt.adapters.dyntable.dynamic_table.refresh.record import Recorder
from dbt.adapters.dyntable.runner.control import ActionRefused, Control
from dbt.adapters.dyntable.runner.graph import build_graph
from dbt.adapters.dyntable.runner.live import LiveView
from dbt.adapters.dyntable.runner.web.app import create_app
from dbt.adapters.dyntable.runner.web.auth import ACTION_HEADER, BindRefused, check_bind
from dbt.adapters.dyntable.runner.web.metrics import registry_for
from dbt.adapters.dyntable.runner.web.server import PageError, PageOptions, bind
from tests.unit.runner.fakes import node

with warnings.catch_warnings():
    # Starlette 1.x suggests httpx2 over httpx for its test client; either works here.
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

ACTION = {ACTION_HEADER: "1"}
LOCAL = "http://127.0.0.1"


def no_engine():
    raise ActionRefused("no engine in these tests", 503)


@pytest.fixture
def control(tmp_path: Path) -> Control:
    graph = build_graph([node("orders", "1 minute"), node("daily", "5 minutes", reads=["orders"])])
    store = MetadataStore(tmp_path / "meta", "meta")
    store.ensure()
    return Control(graph, LiveView(graph, store, ttl_seconds=0), Recorder(store), no_engine)


def client(
    control: Control, token: str | None = None, loopback: bool = True, runner: bool = False
) -> TestClient:
    registry, _ = registry_for(control.view, datetime.now(timezone.utc), runner)
    return TestClient(create_app(control, registry, "shop", token, loopback), base_url=LOCAL)


def test_the_state_lists_every_dt_and_the_graph(control: Control) -> None:
    state = client(control).get("/api/state").json()
    assert [dt["model"] for dt in state["dts"]] == ["orders", "daily"]
    assert {dt["status"] for dt in state["dts"]} == {"NOT INITIALIZED"}
    shown = [text for trace in state["graph"]["data"] for text in trace.get("text", [])]
    assert {"orders", "daily"} <= set(shown)
    detail = client(control).get("/api/dt/daily").json()
    assert detail["history"] == [] and detail["dt"]["target_lag"] == "5 minutes"
    assert client(control).get("/api/dt/nope").status_code == 404


def test_metrics_parse_as_prometheus_text(control: Control) -> None:
    text = client(control).get("/metrics").text
    families = {family.name: family for family in text_string_to_metric_families(text)}
    targets = {s.labels["model"]: s.value for s in families["dyntable_target_lag_seconds"].samples}
    assert targets == {"orders": 60.0, "daily": 300.0}
    states = {
        (s.labels["model"], s.labels["state"]): s.value for s in families["dyntable_scheduling_state"].samples
    }
    assert states[("orders", "ACTIVE")] == 1.0 and states[("orders", "SUSPENDED")] == 0.0
    assert "dyntable_runner_ticks" not in families  # a page beside a runner has no ticks of its own
    assert "dyntable_runner_ticks" in {
        f.name for f in text_string_to_metric_families(client(control, runner=True).get("/metrics").text)
    }


def test_suspend_and_resume_write_the_graph_history_as_the_cli_does(control: Control) -> None:
    page = client(control)
    assert page.post("/api/dt/orders/suspend").status_code == 403  # no action header: refused
    assert page.post("/api/dt/orders/suspend", headers=ACTION).status_code == 200
    assert control.view.metadata.graph()["s.orders"].scheduling_state == "SUSPENDED"
    orders = next(dt for dt in page.get("/api/state").json()["dts"] if dt["model"] == "orders")
    assert orders["status"] == "SUSPENDED"
    assert page.post("/api/dt/orders/resume", headers=ACTION).json()["message"].startswith("Resumed orders")
    assert control.view.metadata.graph()["s.orders"].scheduling_state == "ACTIVE"
    refused = page.post("/api/dt/orders/refresh", headers=ACTION)
    assert refused.status_code == 503 and "no engine" in refused.json()["error"]
    control.stopping.set()
    assert page.post("/api/dt/orders/suspend", headers=ACTION).status_code == 503


def test_health_and_readiness(control: Control) -> None:
    page = client(control)
    assert page.get("/healthz").text == "ok"
    assert page.get("/readyz").status_code == 200  # beside a runner: ready on its metadata
    control.runs_engine = True
    starting = page.get("/readyz")
    assert starting.status_code == 503 and "engine is starting" in starting.text
    control.stopping.set()
    assert page.get("/readyz").text == "stopping"


def test_a_non_loopback_bind_needs_a_token() -> None:
    with pytest.raises(BindRefused, match="--ui-token"):
        check_bind("0.0.0.0", None)
    with pytest.raises(BindRefused, match="--ui-token"):
        bind(PageOptions("example.internal", 0))
    check_bind("0.0.0.0", "s3cret")
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        check_bind(host, None)
    sock = bind(PageOptions("127.0.0.1", 0))
    try:
        with pytest.raises(PageError, match="--ui-port"):
            bind(PageOptions("127.0.0.1", sock.getsockname()[1]))
    finally:
        sock.close()


def test_with_a_token_every_request_but_health_carries_it(control: Control) -> None:
    page = client(control, token="s3cret", loopback=False)
    assert page.get("/api/state").status_code == 401
    assert page.get("/metrics").status_code == 401
    assert page.get("/healthz").status_code == 200
    assert page.get("/metrics", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert page.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    login = page.get("/?token=s3cret", follow_redirects=False)
    assert login.status_code == 303 and login.headers["location"] == "/"
    assert "httponly" in login.headers["set-cookie"].lower()
    assert page.get("/api/state").status_code == 200  # the cookie it set


def test_on_loopback_a_foreign_host_name_is_refused(control: Control) -> None:
    page = client(control)
    assert page.get("/api/state", headers={"Host": "attacker.example:8765"}).status_code == 421
    assert page.get("/api/state", headers={"Host": "localhost:8765"}).status_code == 200
