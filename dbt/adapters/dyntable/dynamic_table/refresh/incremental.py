"""An INCREMENTAL refresh: the delta query over the sources' changes, applied by the engine
alone where ``strategy.in_engine`` says so, else staged and validated in this process and
written by the writer ``write.py`` chooses (docs/ARCHITECTURE.md, "Applying").
"""

from __future__ import annotations

from functools import partial
from typing import Callable, Optional

from dbt.adapters.dyntable.changes import SourceReads
from dbt.adapters.dyntable.delta_log import DeltaLog
from dbt.adapters.dyntable.differentiation import DeltaQuery
from dbt.adapters.dyntable.dynamic_table.lifecycle import Action
from dbt.adapters.dyntable.dynamic_table.refresh import guard, immutable_rows
from dbt.adapters.dyntable.dynamic_table.refresh.apply import engine_checks, folding, prepare
from dbt.adapters.dyntable.dynamic_table.refresh.commit import Refresh, Write, commit, unchanged
from dbt.adapters.dyntable.dynamic_table.refresh.delta_query import Derived
from dbt.adapters.dyntable.dynamic_table.refresh.engine_writer import EngineWriter
from dbt.adapters.dyntable.dynamic_table.refresh.planned_query import PlannedQuery
from dbt.adapters.dyntable.dynamic_table.refresh.record import Recorder, RefreshResult
from dbt.adapters.dyntable.dynamic_table.refresh.strategy import InEngine, in_engine
from dbt.adapters.dyntable.dynamic_table.refresh.target import Target
from dbt.adapters.dyntable.dynamic_table.refresh.write import writer_for
from dbt.adapters.dyntable.engines.base import Engine

#: The reason of an INCREMENTAL refresh whose delta turned out empty: the DT was not written.
UNCHANGED_RESULT = "sources changed; the query's result did not"


def incremental(
    engine: Engine, recorder: Recorder, refresh: Refresh, dt_log: DeltaLog, derived: Derived
) -> RefreshResult:
    """Apply the delta of the sources' changes (stage 3's ``derived``) to the DT, in one commit
    or none."""
    dt, planned = refresh.dt, refresh.decision.planned
    assert planned is not None
    delta, reads = derived
    # A check the delta query makes (a fold's, ``aggregate.py``) fails whichever path runs it.
    with (
        engine_checks(planned.key.columns or ()),
        immutable_rows.mutable_delta(engine, dt, delta.sql, refresh.observed.data_timestamp) as (
            delta_sql,
            ignored,
        ),
    ):
        target = Target(engine, dt, dt_log)
        alone = _in_engine(recorder, refresh, dt_log, target, planned, delta, delta_sql, reads)
        if alone is not None:
            return alone
        key = planned.key
        staged = prepare(
            target,
            delta_sql,
            planned.plan.columns,
            key.columns,
            key.declared_by,
            delta.insert_only,
            consolidated=True,  # the delta query, typed by the DT (``delta_query``)
        )
        if refresh.guarded:
            guard.check(
                dt, Action.INCREMENTAL, guard.Change(target.row_count(), staged.inserted, staged.deleted)
            )
        if staged.is_empty:
            result = unchanged(recorder, refresh, dt_log)
            result.reason = (
                f"{UNCHANGED_RESULT} outside the immutable region" if ignored else UNCHANGED_RESULT
            )
        else:
            writer = writer_for(target, staged)
            write = partial(writer.apply, staged)
            result = commit(recorder, refresh, dt_log, refresh.frontier, write, writer.carries_intent)
    result.warnings += [staged.warning] if staged.warning else []
    result.immutable_rows_ignored = ignored
    result.source_reads += reads(delta_sql)
    return result


def _in_engine(
    recorder: Recorder,
    refresh: Refresh,
    dt_log: DeltaLog,
    target: Target,
    planned: PlannedQuery,
    delta: DeltaQuery,
    delta_sql: str,
    reads: Callable[[str], SourceReads],
) -> Optional[RefreshResult]:
    """The refresh, where the engine applies the delta alone (``strategy.InEngine``); None
    where the delta comes to this process."""
    key, columns = planned.key, planned.plan.columns
    how = in_engine(
        refresh.dt,
        refresh.guarded,
        delta,
        key.columns,
        key.declared_by,
        target.engine.capabilities,
        refresh.observed.dt_size_bytes,
    )
    engine_writer = EngineWriter(target)
    if how is InEngine.APPEND:
        append = partial(engine_writer.append, delta_sql, columns)
        # The engine's append records the intent with a writer option.
        return _applied(recorder, refresh, dt_log, append, reads(delta_sql), carries_intent=True)
    accumulation = delta.accumulation
    if how is InEngine.ACCUMULATE and accumulation is not None:
        writer = writer_for(target)
        accumulate = partial(writer.accumulate, folding(target, accumulation))
        return _applied(recorder, refresh, dt_log, accumulate, reads(accumulation.sql), writer.carries_intent)
    if how is InEngine.MERGE:
        assert key.columns is not None
        proven = key.columns

        merge = partial(engine_writer.merge_on_key, delta_sql, columns, proven)
        return _applied(recorder, refresh, dt_log, merge, reads(delta_sql), engine_writer.carries_intent)
    return None


def _applied(
    recorder: Recorder,
    refresh: Refresh,
    dt_log: DeltaLog,
    write: Write,
    read: SourceReads,
    carries_intent: bool = False,
) -> RefreshResult:
    result = commit(recorder, refresh, dt_log, refresh.frontier, write, carries_intent)
    if result.rows_inserted == result.rows_deleted == 0:
        result.reason = UNCHANGED_RESULT
    result.source_reads += read
    return result
