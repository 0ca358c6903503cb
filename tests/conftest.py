"""Shared fixtures: one embedded engine per test session, on a temporary warehouse."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from dbt.adapters.dyntable.engines.embedded import EmbeddedEngine


@pytest.fixture(scope="session")
def embedded_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedEngine]:
    """A running embedded engine (Sail in-process on 127.0.0.1), stopped after the session."""
    engine = EmbeddedEngine(Path(tmp_path_factory.mktemp("warehouse"))).start()
    yield engine
    engine.stop()


@pytest.fixture(scope="session")
def spark(embedded_engine: EmbeddedEngine):
    return embedded_engine.spark
