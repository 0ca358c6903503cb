"""The ``--profile`` option and markers; the embedded engine for the embedded engine's own tests.

The engine every functional test uses is the ``engine`` fixture of tests/functional/conftest.py,
the one ``--profile`` names.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

from dbt.adapters.dyntable.engines.embedded import EmbeddedEngine
from tests import cpu_accounting

#: Profiles the functional tests run on (see tests/functional/conftest.py).
PROFILES = ("embedded", "spark_session")


def pytest_addoption(parser: pytest.Parser) -> None:
    # Registered here, not in tests/functional/conftest.py: pytest only reads options from the
    # conftests it loads before collecting, and a plain `pytest` (testpaths = tests) loads this
    # file but not tests/functional/conftest.py that early.
    parser.addoption(
        "--profile",
        action="store",
        default="embedded",
        choices=PROFILES,
        help="engine the functional tests run dbt on: embedded (Sail in-process, the default) "
        "or spark_session (JVM Spark with delta-spark; skipped where Delta's jars cannot be "
        "resolved, see DYNTABLE_SPARK_JARS)",
    )
    parser.addoption(
        "--cpu-report",
        action="store",
        default=None,
        metavar="PATH",
        help="append each test's CPU seconds (this process tree's) to PATH.<pid>; "
        "`python -m tests.cpu_accounting PATH.*` sums them by file (tests/cpu_accounting.py)",
    )


def pytest_configure(config: pytest.Config) -> None:
    cpu_accounting.register(config)
    if config.getoption("--profile") == "spark_session" and not hasattr(config, "workerinput"):
        _share_driver_classes(config)
    config.addinivalue_line(
        "markers", "skip_profile(*profiles, reason=...): skip the test when --profile is one of these"
    )
    config.addinivalue_line(
        "markers",
        "xfail_profile(*profiles, reason=...): strict xfail when --profile is one of these "
        "(an engine gap the test documents)",
    )


def _share_driver_classes(config: pytest.Config) -> None:
    """Let every Spark driver the JVM suite starts map one class archive (see
    tests/functional/jvm_class_archive.py); made here, before any test or worker starts."""
    from tests.functional.jvm_class_archive import SUBMIT_OPTS_ENV, prepare
    from tests.functional.profiles import spark_jars_folder

    jars = spark_jars_folder()
    cache = getattr(config, "cache", None)  # absent under `-p no:cacheprovider`
    if jars is None or cache is None or config.option.collectonly:
        return  # Maven's jars would be resolved first; a bare collection starts no driver
    options = prepare(cache.mkdir("jvm-class-archive"), jars)
    if options is not None:
        os.environ[SUBMIT_OPTS_ENV] = f"{os.environ.get(SUBMIT_OPTS_ENV, '')} {options}".strip()


@pytest.fixture(scope="session")
def embedded_engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EmbeddedEngine]:
    """A running embedded engine (Sail in-process on 127.0.0.1) of its own, for the embedded
    engine's own tests; stopped after the session. Not in a JVM process: a Spark Connect session
    would turn the whole process to Spark Connect, beside which the JVM engine cannot run."""
    if request.config.getoption("--profile") != "embedded":
        pytest.skip("tests the embedded engine itself: runs in the embedded profile's process")
    engine = EmbeddedEngine(Path(tmp_path_factory.mktemp("warehouse"))).start()
    yield engine
    engine.stop()
