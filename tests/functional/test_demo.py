"""The end-to-end demo (integration_project/demo.py), as `scripts/demo` runs it, on the engine under
test: the project's `embedded` or `session` target. It builds the shop from an empty warehouse,
keeps its dynamic tables fresh with the runner while the generator streams changes, checks every
dynamic table against its query at its data timestamp and writes the lag report; it exits
non-zero if any step or check fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.functional.profiles import SPARK_JARS_ENV, spark_jars_folder

REPO = Path(__file__).resolve().parents[2]
BUILD_OUTPUT = ("target", "logs", "dbt_packages", ".dyntable", ".user.yml")
TARGETS = {"embedded": "embedded", "spark_session": "session"}


def test_demo_builds_streams_and_proves_every_dynamic_table(
    dyntable_profile: str, engine, tmp_path: Path
) -> None:
    project = tmp_path / "integration_project"
    shutil.copytree(REPO / "integration_project", project, ignore=shutil.ignore_patterns(*BUILD_OUTPUT))
    env = dict(os.environ, DBT_SEND_ANONYMOUS_USAGE_STATS="false")
    for variable in ("DBT_LOG_PATH", "SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE"):
        env.pop(variable, None)
    jars = spark_jars_folder()
    if jars is not None:
        env[SPARK_JARS_ENV] = str(jars)
    done = subprocess.run(
        [sys.executable, "demo.py", "--target", TARGETS[dyntable_profile], "--seconds", "15"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert "every dynamic table equals its query at its data timestamp" in output
    assert (project / "target" / "lag_report.html").is_file()


#: The demo on object storage writes the shop's history through an S3 API server (hundreds of
#: commits): about 4 minutes on an idle 2-core machine, 15 on a loaded one, more than the CI
#: budget leaves. The lifecycle, crash and runner tests of tests/functional/object_storage/ cover
#: the same code in CI; this one runs where this variable is set.
S3_DEMO_ENV = "DYNTABLE_S3_DEMO"


def test_demo_on_object_storage_starts_its_own_s3_server(
    dyntable_profile: str, engine, tmp_path: Path
) -> None:
    import pytest

    if dyntable_profile != "embedded" or not os.environ.get(S3_DEMO_ENV):
        pytest.skip(f"the demo on S3 runs on the embedded engine where {S3_DEMO_ENV}=1 (see S3_DEMO_ENV)")
    project = tmp_path / "integration_project"
    shutil.copytree(REPO / "integration_project", project, ignore=shutil.ignore_patterns(*BUILD_OUTPUT))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["DBT_SEND_ANONYMOUS_USAGE_STATS"] = "false"
    done = subprocess.run(
        [sys.executable, "demo.py", "--warehouse", "s3://warehouse/shop", "--seconds", "15"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert "an S3 API server for the demo" in output
    assert "every dynamic table equals its query at its data timestamp" in output
    assert not (project / ".dyntable" / "warehouse").exists()  # nothing local stood in for it
