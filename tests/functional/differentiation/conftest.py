from __future__ import annotations

import pytest

from dbt.adapters.dyntable.engines.embedded import EmbeddedEngine
from tests.functional.differentiation.harness import Warehouse


@pytest.fixture
def wh(embedded_engine: EmbeddedEngine) -> Warehouse:
    """A fresh schema on the session's embedded engine."""
    return Warehouse(embedded_engine)
