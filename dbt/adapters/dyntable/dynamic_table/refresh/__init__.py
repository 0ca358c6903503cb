"""Refreshing a dynamic table: a short pipeline of typed stages (docs/ARCHITECTURE.md).

``decide`` → plan (``planned_query``) → derive (``delta_query``) → ``apply`` → ``record``, run by
:class:`RefreshPipeline`.
"""

from dbt.adapters.dyntable.dynamic_table.lifecycle import RefreshRequest
from dbt.adapters.dyntable.dynamic_table.model import RefreshError
from dbt.adapters.dyntable.dynamic_table.refresh.pipeline import RefreshPipeline
from dbt.adapters.dyntable.dynamic_table.refresh.record import RefreshFailed, RefreshResult

__all__ = ["RefreshError", "RefreshFailed", "RefreshPipeline", "RefreshRequest", "RefreshResult"]
