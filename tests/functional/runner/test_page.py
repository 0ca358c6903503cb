"""The runner's live page in a real headless browser (Debian's Chromium, driven by Selenium),
against `dyntable run --ui` keeping the shop (integration_project) fresh while its generator
streams changes in: the graph shows every dynamic table, states and lags update without a reload,
a suspended DT shows as suspended, refresh-now adds a MANUAL refresh to the history, explain shows
the plan; /metrics agrees with `dyntable status`; `dyntable report` draws the same charts; SIGTERM
stops the runner cleanly.

One runner and one browser serve the whole module. The shop's target lags are divided by 3
(1 minute → 20 seconds) and the runner's time scale is 0.1, so ticks come every 9.6 s.

Only on the embedded engine: the page reads the scheduler and the metadata tables, the same on
both engines; test_shutdown.py and test_runner.py run the runner on JVM Spark.

Set DYNTABLE_SCREENSHOTS to a folder to keep the screenshots there (docs/images holds the
README's).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dbt.adapters.dyntable.dynamic_table.metadata import MetadataStore

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
BUILD_OUTPUT = ("target", "logs", "dbt_packages", ".dyntable", ".user.yml")
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
#: Chromium on a machine without network: no sandbox (root in CI), and nothing that calls home.
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1900",
)
LAGS = {
    "1 minute": "20 seconds",
    "2 minutes": "40 seconds",
    "5 minutes": "100 seconds",
    "10 minutes": "200 seconds",
}
TIME_SCALE = "0.1"
#: Seconds to wait for what the page should show: generous, as the machine may be busy.
WAIT = 90

pytestmark = pytest.mark.skip_profile(
    "spark_session", reason="the page is the same on both engines; the runner's JVM tests are elsewhere"
)


@dataclass
class Shop:
    root: Path
    url: str
    runner: subprocess.Popen
    log: Path

    @property
    def store(self) -> MetadataStore:
        return MetadataStore(self.root / ".dyntable" / "warehouse" / "dyntable_meta", "dyntable_meta")


def run(root: Path, *command: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DBT_LOG_PATH"}
    done = subprocess.run(
        command, cwd=root, env=dict(env, COLUMNS="250"), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def dyntable(root: Path, *args: str) -> list:
    return [str(BIN / "dyntable"), *args, "--project-dir", str(root), "--profiles-dir", str(root)]


#: The shop's DTs with a target lag of their own (the others take their consumers').
OWN_LAG = {
    "latest_order_per_customer",
    "daily_revenue",
    "all_sales",
    "dormant_customers",
    "customer_stats",
    "sales_by_channel",
}


def post(shop: "Shop", model: str, action: str) -> None:
    request = urllib.request.Request(
        f"{shop.url}api/dt/{model}/{action}", method="POST", headers={"X-Dyntable-Request": "1"}
    )
    assert urllib.request.urlopen(request).status == 200


def wait_for(what: Callable[[], Any], seconds: float = WAIT, message: str = "") -> Any:
    deadline = time.monotonic() + seconds
    while True:
        try:
            value = what()
        except Exception:  # noqa: BLE001 - not there yet
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds} s: {message}")
        time.sleep(0.25)


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shop]:
    root = tmp_path_factory.mktemp("page") / "shop"
    shutil.copytree(REPO / "integration_project", root, ignore=shutil.ignore_patterns(*BUILD_OUTPUT))
    for model in (root / "models" / "shop").glob("*.sql"):
        text = model.read_text()
        for lag, shorter in LAGS.items():
            text = text.replace(f"target_lag='{lag}'", f"target_lag='{shorter}'")
        model.write_text(text)
    warehouse = str(root / ".dyntable" / "warehouse")
    run(root, sys.executable, "generator.py", "init", "--warehouse", warehouse)
    run(root, str(BIN / "dbt"), "run", "--select", "config.materialized:dynamic_table", "--profiles-dir", ".")
    stream = subprocess.Popen(
        [sys.executable, "generator.py", "stream", "--warehouse", warehouse, "--seconds", "600"],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    log = root / "runner.log"
    with log.open("w") as out:
        runner = subprocess.Popen(
            dyntable(root, "run", "--ui", "--ui-port", "0", "--time-scale", TIME_SCALE),
            cwd=root,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={k: v for k, v in os.environ.items() if k != "DBT_LOG_PATH"},
        )
    try:
        url = wait_for(
            lambda: re.search(r"Live page: (http://\S+/)", log.read_text()).group(1), 120, "the URL"
        )
        wait_for(lambda: urllib.request.urlopen(url + "readyz").status == 200, 120, "ready")
        yield Shop(root, url, runner, log)
    finally:
        for process in (runner, stream):
            if process.poll() is None:
                process.kill()
                process.wait()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.skip(
            "Chromium and its driver are not installed: install Debian's chromium and chromium-driver "
            "packages (scripts/bootstrap does where it may run apt-get)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    profile = tempfile.mkdtemp(prefix="dyntable-chromium-")
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def screenshot(browser: Any, name: str) -> None:
    folder = os.environ.get("DYNTABLE_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(Path(folder) / name))


def rows(browser: Any) -> Dict[str, Dict[str, str]]:
    """The table of DTs as shown: model → its cells."""
    return browser.execute_script(
        """const shown = {};
        for (const row of document.querySelectorAll('#dts tbody tr')) {
          const cells = [...row.cells].map((c) => c.textContent.trim());
          shown[row.dataset.dt] = {status: cells[1], lag: cells[2], stamp: cells[4], last: cells[5]};
        }
        return shown;"""
    )


def graph_trace(browser: Any, name: str) -> list:
    """The models the drawn graph shows in its trace ``name`` (a status)."""
    return browser.execute_script(
        "const t = document.getElementById('graph').data.find((t) => t.name === arguments[0]);"
        "return t ? t.text : [];",
        name,
    )


def act(browser: Any, button: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    browser.find_element(By.ID, button).click()
    WebDriverWait(browser, 10).until(expected_conditions.alert_is_present())
    browser.switch_to.alert.accept()


def select(browser: Any, model: str) -> None:
    from selenium.webdriver.common.by import By

    browser.find_element(By.CSS_SELECTOR, f'#dts tr[data-dt="{model}"]').click()
    wait_for(lambda: browser.find_element(By.ID, "detail-model").text == model, message=model)


DTS = {
    "dt_orders",
    "dt_customers",
    "fct_order_lines",
    "daily_revenue",
    "customer_stats",
    "latest_order_per_customer",
    "dormant_customers",
    "all_sales",
    "sales_by_channel",
}


def test_the_graph_shows_every_dynamic_table_and_what_it_reads(shop: Shop, browser: Any) -> None:
    browser.get(shop.url)
    assert wait_for(lambda: set(rows(browser)) == DTS, message="every DT listed")
    drawn = browser.execute_script(
        "return [...document.querySelectorAll('#graph .textpoint text')].map((t) => t.textContent)"
    )
    assert DTS | {"raw.orders", "raw.customers", "raw.store_sales"} <= set(drawn)
    # lineage: all_sales reads dt_orders and raw.payments; sales_by_channel reads it across a boundary
    assert wait_for(lambda: graph_trace(browser, "ACTIVE"), message="ACTIVE DTs drawn")


def test_states_and_lags_update_without_a_reload(shop: Shop, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    browser.execute_script("window.stillTheSamePage = true")
    before, updated = rows(browser), browser.find_element(By.ID, "updated").text
    wait_for(lambda: browser.find_element(By.ID, "updated").text != updated, message="a new poll")
    # data streams in: a tick moves data timestamps; lags move with the clock and drop at each refresh
    moved = wait_for(
        lambda: [m for m, row in rows(browser).items() if row["stamp"] != before[m]["stamp"]],
        message="a data timestamp moving",
    )
    assert moved and any(rows(browser)[m]["lag"] != before[m]["lag"] for m in DTS)
    assert browser.execute_script("return window.stillTheSamePage") is True
    select(browser, "daily_revenue")
    wait_for(lambda: browser.execute_script("return document.getElementById('lag').data.length") == 2)
    screenshot(browser, "live-page.png")


def test_a_suspended_dt_shows_as_suspended(shop: Shop, browser: Any) -> None:
    select(browser, "daily_revenue")
    act(browser, "suspend")
    wait_for(
        lambda: rows(browser)["daily_revenue"]["status"] == "SUSPENDED", message="SUSPENDED in the table"
    )
    assert wait_for(
        lambda: "daily_revenue" in graph_trace(browser, "SUSPENDED"), message="SUSPENDED in the graph"
    )
    assert shop.store.graph()["shop.daily_revenue"].scheduling_state == "SUSPENDED"  # as `dyntable suspend`
    screenshot(browser, "live-page-suspended.png")
    act(browser, "resume")
    wait_for(lambda: rows(browser)["daily_revenue"]["status"] != "SUSPENDED", message="resumed")
    assert shop.store.graph()["shop.daily_revenue"].scheduling_state == "ACTIVE"


def test_refresh_now_adds_a_manual_refresh_to_the_history(shop: Shop, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    select(browser, "customer_stats")
    act(browser, "refresh")
    # The row is read in the same call that finds it: the page redraws the history as refreshes
    # land, and a row found before a redraw is no longer in the page.
    states = wait_for(  # after the runner's refresh of customer_stats' tables in flight, if any
        lambda: [
            row.get_attribute("data-state")
            for row in browser.find_elements(By.CSS_SELECTOR, '#history tbody tr[data-trigger="MANUAL"]')
        ],
        2 * WAIT,
        "a MANUAL row in the history",
    )
    assert states[0] == "SUCCEEDED", states
    assert [r for r in shop.store.history("shop.customer_stats") if r.refresh_trigger == "MANUAL"]


def test_explain_shows_the_differentiation_plan(shop: Shop, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    select(browser, "daily_revenue")
    browser.find_element(By.ID, "explain").click()
    text = wait_for(
        lambda: (t := browser.find_element(By.ID, "explain-text").text) and "Explaining" not in t and t,
        message="the explanation",
    )
    assert "Aggregate" in text, text


def test_metrics_parse_and_their_lags_match_dyntable_status(shop: Shop) -> None:
    def scrape() -> Dict[str, Any]:
        text = urllib.request.urlopen(shop.url + "metrics").read().decode()
        return {family.name: family for family in text_string_to_metric_families(text)}

    def by_model(families: Dict[str, Any], name: str) -> Dict[str, float]:
        return {s.labels["model"]: s.value for s in families[name].samples if s.name == name}

    def counted(families: Dict[str, Any], name: str) -> float:
        return sum(s.value for s in families[name].samples if s.name.endswith("_total"))

    wait_for(lambda: counted(scrape(), "dyntable_runner_ticks") > 0, message="a tick counted")
    assert counted(scrape(), "dyntable_refreshes") > 0

    # Hold the data timestamps still: suspend every DT with a lag of its own (the others refresh
    # with them), and wait for the refreshes in flight to end and their tick to record them.
    scheduled = [m for m, lag in by_model(scrape(), "dyntable_target_lag_seconds").items() if m in OWN_LAG]
    for model in scheduled:
        post(shop, model, "suspend")
    try:
        wait_for(lambda: not any(by_model(scrape(), "dyntable_refreshing").values()), message="no refresh")
        time.sleep(3)
        before = time.time()
        families = scrape()
        lags, stamps = (
            by_model(families, "dyntable_lag_seconds"),
            by_model(families, "dyntable_data_timestamp_seconds"),
        )
        status = run(shop.root, *dyntable(shop.root, "status", "--time-scale", TIME_SCALE)).stdout
        after = time.time()
        assert by_model(scrape(), "dyntable_data_timestamp_seconds") == stamps  # nothing moved meanwhile
    finally:
        for model in scheduled:
            post(shop, model, "resume")
    assert set(lags) == DTS
    for model in DTS:
        line = next(line for line in status.splitlines() if line.strip().startswith(model + " "))
        stamp, shown, unit = re.search(r"(\d\d:\d\d:\d\d)\s+│\s+([\d.]+) (s|min)\s", line).groups()
        assert time.strftime("%H:%M:%S", time.gmtime(stamps[model])) == stamp, line
        # the same data timestamp: status's lag is the scraped one plus the time between the two,
        # within the rounding of what it shows (0.1 s, or 0.1 min past two minutes)
        seconds, rounding = (float(shown), 0.05) if unit == "s" else (float(shown) * 60, 3.0)
        assert lags[model] - rounding <= seconds <= lags[model] + (after - before) + rounding, (model, line)


def test_the_report_draws_the_pages_charts(shop: Shop, browser: Any, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    run(shop.root, *dyntable(shop.root, "report", "--output", str(page)))
    browser.get(page.as_uri())
    wait_for(
        lambda: browser.execute_script("return document.querySelectorAll('.js-plotly-plot').length") >= 1 + 9
    )
    titles = browser.execute_script(
        "return [...document.querySelectorAll('.ytitle')].map((t) => t.textContent)"
    )
    assert "lag (s)" in titles and "refresh duration (s)" in titles
    screenshot(browser, "report.png")


def test_sigterm_stops_the_runner_cleanly(shop: Shop) -> None:
    signalled = time.monotonic()
    shop.runner.send_signal(signal.SIGTERM)
    assert shop.runner.wait(timeout=15) == 0, shop.log.read_text()[-3000:]
    assert time.monotonic() - signalled < 10
    assert "SIGTERM: stopping" in shop.log.read_text()
