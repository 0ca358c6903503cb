"""Functional tests: dbt itself, run in this process on a dyntable profile.

The profile comes from ``--profile`` (registered in ``tests/conftest.py``):

* ``embedded`` (default): Sail in-process. Every test uses ONE warehouse directory for the whole
  pytest session, so the adapter's engine registry starts a single engine for all of them; the
  fixture below stops it when the session ends.
* ``spark_session``: JVM Spark with delta-spark. Delta's jars come from Maven, or from the folder
  named by the environment variable ``DYNTABLE_SPARK_JARS``; where neither works, every test using
  the profile is skipped with the reason.

Tests mark themselves ``@pytest.mark.skip_profile("spark_session", reason=...)`` as dbt-spark's own
functional tests do, and ``@pytest.mark.xfail_profile("embedded", reason=...)`` where an engine
lacks what a test needs (a strict xfail: it fails once the engine gains the feature).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

# dbt's functional-test fixtures (project, adapter, unique_schema, ...), scoped to this directory:
# a `pytest_plugins` here would not be allowed, as this is not the top-level conftest.
from dbt.tests.fixtures.project import *  # noqa: F401,F403

SPARK_JARS_ENV = "DYNTABLE_SPARK_JARS"
PROFILE_METHODS = {"embedded": "embedded", "spark_session": "session"}


@pytest.fixture(scope="session")
def dyntable_profile(request: pytest.FixtureRequest) -> str:
    return request.config.getoption("--profile")


@pytest.fixture(scope="session")
def dyntable_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The session's one warehouse directory (absolute); stops the engine dbt started on it."""
    from dbt.adapters.dyntable.connections import EngineRegistry

    warehouse = tmp_path_factory.mktemp("dbt_warehouse").resolve()
    yield warehouse
    EngineRegistry.stop_all()


def spark_jars_folder() -> Path | None:
    """The folder of Delta jars named by DYNTABLE_SPARK_JARS, checked; None when unset."""
    from dbt.adapters.dyntable.engines.base import EngineError
    from dbt.adapters.dyntable.engines.jvm import delta_jars

    value = os.environ.get(SPARK_JARS_ENV)
    if not value:
        return None
    folder = Path(value).expanduser().resolve()
    try:
        delta_jars(folder)
    except EngineError as exc:
        # Set but wrong is a mistake to report, not a reason to skip quietly.
        raise pytest.UsageError(f"{SPARK_JARS_ENV}={value}: {exc}") from exc
    return folder


def check_delta_jars_resolve(warehouse: Path, jars: Path | None) -> None:
    """Start JVM Spark with Delta once; skip the session's tests if Delta's jars cannot be had."""
    from dbt.adapters.dyntable.engines.base import EngineError
    from dbt.adapters.dyntable.engines.jvm import JvmSparkEngine

    try:
        engine = JvmSparkEngine(warehouse, spark_jars=jars).start()
    except EngineError as exc:
        message = str(exc)
        if jars is None and "could not be resolved from Maven" in message:
            pytest.skip(
                "spark_session profile: Delta Lake's JVM jars cannot be resolved (Maven is not "
                f"reachable from this machine and {SPARK_JARS_ENV} is not set to a local folder "
                "holding delta-spark_2.13-<version>.jar and delta-storage-<version>.jar)"
            )
        raise
    engine.stop()


@pytest.fixture(scope="session")
def dbt_profile_target(
    dyntable_profile: str, dyntable_warehouse: Path, tmp_path_factory: pytest.TempPathFactory
) -> Dict[str, Any]:
    target: Dict[str, Any] = {
        "type": "dyntable",
        "method": PROFILE_METHODS[dyntable_profile],
        # dbt's `project` fixture replaces this with the test's unique schema.
        "schema": "dyntable_functional",
        "threads": 1,
        "warehouse": str(dyntable_warehouse),
    }
    if dyntable_profile == "spark_session":
        jars = spark_jars_folder()
        check_delta_jars_resolve(tmp_path_factory.mktemp("jvm_probe"), jars)
        if jars is not None:
            target["spark_jars"] = str(jars)
    return target


@pytest.fixture(autouse=True)
def skip_by_profile_type(request: pytest.FixtureRequest) -> None:
    """Apply `skip_profile` / `xfail_profile` markers for the profile this session runs on."""
    profile = request.config.getoption("--profile")
    marker = request.node.get_closest_marker("skip_profile")
    if marker is not None and profile in marker.args:
        reason = marker.kwargs.get("reason")
        pytest.skip(f"skipped on the '{profile}' profile" + (f": {reason}" if reason else ""))
    for marker in request.node.iter_markers("xfail_profile"):
        if profile in marker.args:
            # strict: when the engine gains the feature, the test says so by failing.
            request.node.add_marker(pytest.mark.xfail(reason=marker.kwargs["reason"], strict=True))
            break
