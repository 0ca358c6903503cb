"""What a failed refresh tells its user (docs/ARCHITECTURE.md, "Errors name the DT once"): the
error as it is where this package wrote it (it says what failed and the fix); where a damaged
table caused it, that table, the damage and the command that rebuilds it (``damaged.py``); else
what the refresh was running when the engine or a library failed, and the fix, with their words
after. "Missing commit file: expected version 0, found 96" alone named no table and no step.
"""

from __future__ import annotations

from typing import Optional

from dbt.adapters.dyntable.changes import ChangeDataFeedUnavailable, UndifferentiableSource
from dbt.adapters.dyntable.differentiation.errors import NotIncrementalizable
from dbt.adapters.dyntable.dynamic_table.lifecycle import Action
from dbt.adapters.dyntable.dynamic_table.locking import RefreshLocked
from dbt.adapters.dyntable.dynamic_table.metadata import MetadataDamaged, MetadataStore
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable, RefreshError
from dbt.adapters.dyntable.dynamic_table.refresh import damaged
from dbt.adapters.dyntable.dynamic_table.refresh.apply import DeltaValidationError
from dbt.adapters.dyntable.dynamic_table.verify import VerifyFailed
from dbt.adapters.dyntable.engines.base import Engine, EngineError, EngineGap
from dbt.adapters.dyntable.storage import StorageError, StorageUnreachable

#: Errors this package raises with what failed and the fix already said.
SAID = (
    RefreshError,
    MetadataDamaged,
    VerifyFailed,
    DeltaValidationError,
    EngineError,
    EngineGap,
    StorageError,
    StorageUnreachable,
    RefreshLocked,
    NotIncrementalizable,
    UndifferentiableSource,
    ChangeDataFeedUnavailable,
)


def explained(
    engine: Engine, metadata: MetadataStore, dt: DynamicTable, error: Exception, action: Optional[Action]
) -> Exception:
    """The error to tell of ``dt``'s refresh, which failed with ``error`` having chosen
    ``action`` (None: before it chose one)."""
    if engine.interrupted:
        return error
    found = damaged.diagnosed(engine, metadata, dt, error)
    if found is not None or isinstance(error, SAID):
        return found or error
    model = dt.model or dt.identifier
    if action is Action.INCREMENTAL:
        doing = (
            "its incremental refresh failed running the delta query over its sources' changes "
            f"(`dyntable explain {model}` prints it). To recompute it instead, set "
            f"refresh_mode='full' on the model, or run `{damaged.rebuild_command(model)}` once"
        )
    elif action in (Action.FULL, Action.REINITIALIZE):
        doing = (
            "recomputing it failed running its query with each source read at the version "
            f"observed; the query is the model's own: `dbt show --select {model}` runs it as it "
            "stands, and a fix to it applies at the next run"
        )
    else:
        doing = (
            "its refresh failed before it chose what to do, reading its sources' Delta logs and "
            f"planning its query: `dyntable explain {model}` goes through the same steps, and "
            "`dyntable repair` checks the tables"
        )
    return RefreshError(f"{doing}. The engine said: {engine.failure_message(error)}")
