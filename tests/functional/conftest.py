"""Functional tests: dbt itself and the engine, on the engine ``--profile`` names.

The profile comes from ``--profile`` (registered in ``tests/conftest.py``):

* ``embedded`` (default): Sail in-process.
* ``spark_session``: JVM Spark with delta-spark. Delta's jars come from the folder named by the
  environment variable ``DYNTABLE_SPARK_JARS``, or from Maven; where neither works, every test is
  skipped with the reason.

A pytest process tests ONE engine, and every test in it uses that engine: the ``engine`` fixture
starts it through the adapter's engine registry with the credentials of the dbt profile the
functional tests run on (``dbt_profile_target``), so dbt's connections and the tests that drive
the engine directly share it. One engine per process is also what the engines need: PySpark cannot
open a classic JVM session in a process that opened a Spark Connect one, and the JVM engine's local
metastore (embedded Derby in ``<warehouse>/.metastore``) serves one process at a time. Tests that
run dbt in subprocesses write the same engine's target into their own profiles.yml, on a
warehouse of their own (``tests/functional/profiles.py``).

Tests mark themselves ``@pytest.mark.skip_profile("spark_session", reason=...)`` as dbt-spark's own
functional tests do, and ``@pytest.mark.xfail_profile("embedded", reason=...)`` where an engine
lacks what a test needs (a strict xfail: it fails once the engine gains the feature).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

# dbt's functional-test fixtures (project, adapter, unique_schema, ...), scoped to this directory:
# a `pytest_plugins` here would not be allowed, as this is not the top-level conftest.
from dbt.tests.fixtures.project import *  # noqa: F401,F403
from dbt_common.behavior_flags import BehaviorFlagRendered

from tests.functional.profiles import SPARK_JARS_ENV, credentials, engine_target, spark_jars_folder

#: Why the JVM engine's tests skip where Delta's jars cannot be had (scripts/test prints it too).
NO_DELTA_JARS = (
    "spark_session profile: Delta Lake's JVM jars are not available: "
    f"{SPARK_JARS_ENV} is not set and Maven cannot be reached from this machine. Set "
    f"{SPARK_JARS_ENV} to a folder holding delta-spark_2.13-<version>.jar and "
    "delta-storage-<version>.jar to run them"
)


#: dbt's switch for its JSON artifacts (manifest.json, written twice per command, and
#: run_results.json): writing them was 5% of the embedded test process's py-spy samples, for files few
#: tests read. Off for every dbt the functional tests run, in this process or in processes they
#: start, but for dbt's own adapter suites (``adapter/``), which read them; another test that reads
#: them asks its command for them (``--write-json``).
WRITE_JSON_ENV = "DBT_WRITE_JSON"
FUNCTIONAL_TESTS = Path(__file__).parent
ADAPTER_SUITES = FUNCTIONAL_TESTS / "adapter"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Iterator[None]:
    # Set before the test's setup: the class fixtures its first test sets up run dbt too. (A
    # hook of every test of the session, the unit tests' too: it picks the functional ones.)
    if not item.path.is_relative_to(FUNCTIONAL_TESTS):
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(WRITE_JSON_ENV, str(item.path.is_relative_to(ADAPTER_SUITES)).lower())
        yield


def calling_module() -> str:
    """What dbt_common's ``BehaviorFlagRendered._default_source`` answers (the first module on the
    stack outside ``dbt_common.behavior_flags``), from each frame's globals."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_globals.get("__name__")
        if name and name != BehaviorFlagRendered.__module__:
            return str(name)
        frame = frame.f_back
    return "Unknown"


@pytest.fixture(scope="session", autouse=True)
def behavior_flag_sources_from_frames() -> Iterator[None]:
    """dbt_common names the source of every behavior flag of every adapter dbt creates with
    ``inspect.stack()``, reading the source lines of each frame and searching ``sys.modules`` for
    its module, even for flags that name their source: 2.5 ms a flag 60 frames deep, 4% of the
    embedded test process's samples and 2% of a JVM worker's time, where dbt runs hundreds of
    times in one process under pytest's deep stacks. The same name, from the frames' globals."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(BehaviorFlagRendered, "_default_source", staticmethod(calling_module))
        yield


@pytest.fixture(scope="session")
def dyntable_profile(request: pytest.FixtureRequest) -> str:
    return request.config.getoption("--profile")


@pytest.fixture(scope="session")
def dyntable_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The session's one warehouse directory (absolute); stops the engine started on it."""
    from dbt.adapters.dyntable.connections import EngineRegistry

    warehouse = tmp_path_factory.mktemp("dbt_warehouse").resolve()
    yield warehouse
    EngineRegistry.stop_all()


@pytest.fixture(scope="session")
def engine_profile_target(dyntable_profile: str, dyntable_warehouse: Path) -> Dict[str, Any]:
    """The dbt target of the engine under test, on the session's warehouse."""
    if dyntable_profile == "spark_session":
        jars = spark_jars_folder()
        if jars is not None:
            from dbt.adapters.dyntable.engines.base import EngineError
            from dbt.adapters.dyntable.engines.jvm_launch import delta_jars

            try:
                delta_jars(jars)
            except EngineError as exc:
                # Set but wrong is a mistake to report, not a reason to skip quietly.
                raise pytest.UsageError(f"{SPARK_JARS_ENV}={jars}: {exc}") from exc
    return engine_target(dyntable_profile, dyntable_warehouse, session=True)


@pytest.fixture(scope="session")
def engine(engine_profile_target: Dict[str, Any]):
    """The session's one engine: the one dbt's connections use (same credentials, same registry
    key), started before dbt's first connection. Skips the session's tests with the reason where
    the JVM engine cannot get Delta's jars."""
    from dbt.adapters.dyntable.connections import EngineRegistry
    from dbt.adapters.dyntable.engines.base import EngineError

    try:
        return EngineRegistry.get(credentials(engine_profile_target), Path.cwd()).engine
    except EngineError as exc:
        message = str(exc)
        maven = "could not be resolved from Maven" in message or "did not start within" in message
        if (
            engine_profile_target["method"] == "session"
            and "spark_jars" not in engine_profile_target
            and maven
        ):
            pytest.skip(f"{NO_DELTA_JARS} (the engine said: {message.splitlines()[0]})")
        raise


@pytest.fixture(scope="session")
def dbt_profile_target(engine: Any, engine_profile_target: Dict[str, Any]) -> Dict[str, Any]:
    """dbt's functional-test profile (dbt's ``project`` fixture sets the test's unique schema)."""
    return dict(engine_profile_target)


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    """Turn `xfail_profile` markers for the profile this session runs on into strict xfails when
    the tests are collected, so they cover a class fixture that fails on that engine too (pytest
    reads a test's xfail before its fixtures are set up)."""
    profile = config.getoption("--profile")
    for item in items:
        for marker in item.iter_markers("xfail_profile"):
            if profile in marker.args:
                # strict: when the engine gains the feature, the test says so by failing.
                item.add_marker(pytest.mark.xfail(reason=marker.kwargs["reason"], strict=True))
                break


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Apply `skip_profile` markers for the profile this session runs on, before any fixture is
    set up (a class's fixtures may use what the skipped engine lacks)."""
    profile = item.config.getoption("--profile")
    marker = item.get_closest_marker("skip_profile")
    if marker is not None and profile in marker.args:
        reason = marker.kwargs.get("reason")
        pytest.skip(f"skipped on the '{profile}' profile" + (f": {reason}" if reason else ""))
