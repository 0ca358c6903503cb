"""Fixtures and hypothesis profiles for the differentiation tests.

Profiles: ``fast`` (the default: enough cases for CI in about two minutes on two cores) and
``long`` (5,000 cases). Choose with ``DYNTABLE_HYPOTHESIS_PROFILE=long``, or with
``pytest tests/functional/differentiation --hypothesis-profile=long`` (this conftest must be
loaded before hypothesis reads the option, which it is when this directory is on the command
line).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from dbt.adapters.dyntable.engines.base import Engine
from tests.functional.differentiation.harness import Warehouse

_COMMON = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    print_blob=True,
)
settings.register_profile("fast", max_examples=220, **_COMMON)
settings.register_profile("long", max_examples=5000, **_COMMON)


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("hypothesis_profile", None):
        settings.load_profile(os.environ.get("DYNTABLE_HYPOTHESIS_PROFILE", "fast"))


@pytest.fixture
def wh(engine: Engine) -> Warehouse:
    """A fresh schema on the session's engine."""
    return Warehouse(engine)
