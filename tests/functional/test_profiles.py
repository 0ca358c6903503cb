"""Bad profile settings, through the real `dbt` command: one clear error naming the setting.

Each case runs `dbt build` in its own process on a small project (a seed and a table model) and
checks that nothing was half-created: no Delta table anywhere under the project.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, List

import pytest
import yaml

pytestmark = pytest.mark.skip_profile("spark_session", reason="these profiles configure the embedded engine")

DBT = Path(sys.executable).with_name("dbt")
DBT_TIMEOUT_SECS = 300

PROJECT_YML = """
name: bad_profiles
version: "1.0"
config-version: 2
profile: bad_profiles
models:
  bad_profiles:
    +file_format: delta
    +materialized: table
seeds:
  bad_profiles:
    +file_format: delta
"""


def make_project(root: Path, **target: Any) -> Path:
    project = root / "project"
    (project / "models").mkdir(parents=True)
    (project / "seeds").mkdir()
    (project / "dbt_project.yml").write_text(PROJECT_YML)
    (project / "models" / "numbers.sql").write_text("select id from {{ ref('letters') }}\n")
    (project / "seeds" / "letters.csv").write_text("id,letter\n1,a\n2,b\n")
    profile = {"type": "dyntable", "schema": "bad_profiles", "threads": 1, **target}
    (project / "profiles.yml").write_text(
        yaml.safe_dump({"bad_profiles": {"target": "t", "outputs": {"t": profile}}})
    )
    return project


def dbt_build(project: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, DBT_SEND_ANONYMOUS_USAGE_STATS="false", DBT_USE_COLORS="false")
    env.pop("DBT_LOG_PATH", None)
    return subprocess.run(
        [str(DBT), "build", "--profiles-dir", str(project)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=DBT_TIMEOUT_SECS,
    )


def error_lines(done: subprocess.CompletedProcess) -> List[str]:
    """The lines of dbt's output that carry our message (dbt wraps it in 'Runtime Error' lines)."""
    output = done.stdout + done.stderr
    return [line.strip() for line in output.splitlines() if "`" in line and "profile" in line]


def delta_tables(root: Path) -> List[Path]:
    return sorted(log.parent for log in root.rglob("_delta_log"))


def assert_failed_naming(done: subprocess.CompletedProcess, setting: str) -> str:
    assert done.returncode != 0, done.stdout[-3000:]
    lines = error_lines(done)
    assert len(lines) == 1, f"expected one error naming `{setting}`, got {lines}:\n{done.stdout[-3000:]}"
    assert f"`{setting}" in lines[0], lines[0]
    return lines[0]


def test_unknown_method_names_method_and_the_accepted_values(tmp_path: Path) -> None:
    project = make_project(tmp_path, method="embeded")
    done = dbt_build(project)
    message = assert_failed_naming(done, "method")
    assert "embeded" in message
    for accepted in ("embedded", "session", "connect", "thrift", "http", "odbc"):
        assert accepted in message
    assert not (project / ".dyntable").exists()
    assert delta_tables(tmp_path) == []


@pytest.mark.parametrize("where", ["is_a_file", "under_a_file"])
def test_unwritable_warehouse_names_warehouse(tmp_path: Path, where: str) -> None:
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where a directory should be\n")
    warehouse = blocker if where == "is_a_file" else blocker / "warehouse"
    project = make_project(tmp_path, warehouse=str(warehouse))
    done = dbt_build(project)
    message = assert_failed_naming(done, "warehouse")
    assert str(warehouse) in message
    assert blocker.read_text() == "a file where a directory should be\n"
    assert delta_tables(tmp_path) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="running as root, which may write into a read-only directory")
def test_read_only_warehouse_names_warehouse(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        project = make_project(tmp_path, warehouse=str(locked / "warehouse"))
        done = dbt_build(project)
        assert_failed_naming(done, "warehouse")
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o755)


def test_port_in_use_names_port(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        project = make_project(tmp_path, port=port)
        done = dbt_build(project)
    message = assert_failed_naming(done, "port")
    assert str(port) in message
    assert delta_tables(tmp_path) == []


def test_failing_model_leaves_no_table_behind(tmp_path: Path) -> None:
    """A model whose query fails while its table is being filled leaves no table (nor files)."""
    project = make_project(tmp_path)
    (project / "models" / "broken.sql").write_text(
        "select id, case when id > 1 then cast(raise_error('boom') as string) else 'ok' end as x\n"
        "from {{ ref('letters') }}\n"
    )
    done = dbt_build(project)
    assert done.returncode != 0
    assert "boom" in done.stdout
    warehouse = project / ".dyntable" / "warehouse" / "bad_profiles"
    # The seed and the good model were built; the broken model left nothing.
    assert delta_tables(warehouse) == [warehouse / "letters", warehouse / "numbers"]


@pytest.mark.parametrize(
    "setting, value, named",
    [
        ("spark.sql.caseSensitive", "certainly", "certainly"),  # refused by the engine
        ("spark.sql.session.timeZone", "Europe/Paris", "sets itself"),  # the engine's own
    ],
)
def test_a_bad_server_side_parameter_names_itself(
    tmp_path: Path, setting: str, value: str, named: str
) -> None:
    project = make_project(tmp_path, server_side_parameters={setting: value})
    done = dbt_build(project)
    message = assert_failed_naming(done, "server_side_parameters")
    assert setting in message and named in message, message
    assert delta_tables(tmp_path) == []


def test_server_side_parameters_reach_the_embedded_session(tmp_path: Path) -> None:
    from dbt.adapters.dyntable.engines.embedded import EmbeddedEngine

    project = make_project(tmp_path, server_side_parameters={"spark.sql.shuffle.partitions": "3"})
    done = dbt_build(project)
    assert done.returncode == 0, done.stdout[-3000:]
    engine = EmbeddedEngine(tmp_path / "warehouse", conf={"spark.sql.shuffle.partitions": "3"}).start()
    try:
        assert engine.spark.conf.get("spark.sql.shuffle.partitions") == "3"
    finally:
        engine.stop()
