"""A refresh that recomputes the DT (FULL, REINITIALIZE; docs/ARCHITECTURE.md, "Applying" and
"Rewritten inputs"): its query pinned at the sources' versions and checked, the DT created where
it does not exist, then only the rows that differ from the DT's written where they are few, else
every row.
"""

from __future__ import annotations

from functools import partial
from typing import List, Optional, Tuple

from pyspark.sql.types import NullType

from dbt.adapters.dyntable.changes import VersionedRelations, version_reads
from dbt.adapters.dyntable.delta_log import DeltaLog
from dbt.adapters.dyntable.dynamic_table.changeset import DEFINITION_CHANGED
from dbt.adapters.dyntable.dynamic_table.failpoints import failpoint
from dbt.adapters.dyntable.dynamic_table.model import RefreshError
from dbt.adapters.dyntable.dynamic_table.refresh import decide, delta_query, guard, immutable_rows
from dbt.adapters.dyntable.dynamic_table.refresh.apply import PreparedDelta, difference
from dbt.adapters.dyntable.dynamic_table.refresh.commit import Refresh, commit, unchanged
from dbt.adapters.dyntable.dynamic_table.refresh.facts import NET_CHANGE_MAX_ROWS
from dbt.adapters.dyntable.dynamic_table.refresh.record import Recorder, RefreshResult
from dbt.adapters.dyntable.dynamic_table.refresh.target import Target
from dbt.adapters.dyntable.dynamic_table.refresh.write import writer_for
from dbt.adapters.dyntable.dynamic_table.table_features import TableFeatures
from dbt.adapters.dyntable.engines.base import Engine
from dbt.adapters.dyntable.vocabulary import first_line, quote

#: A rebuild writes only the rows that differ from the DT's where they are at most this many, or
#: half its rows (docs/ARCHITECTURE.md, "Rewritten inputs").
DIFFERENCE_MIN_ROWS = 10_000


def check_output(target: Target, query: str) -> None:
    """Refuse, before anything is written, a query whose output no Delta table can hold or
    that does not have the columns the model's ``unique_key``, ``partition_by`` or
    ``cluster_by`` names (the engine's own words would name no config key)."""
    fields = target.engine.schema_of(query).fields
    for field in fields:
        if isinstance(field.dataType, NullType):
            raise RefreshError(
                f"column {field.name} has no type (a bare NULL), which a Delta "
                f"table cannot store. Cast it, e.g. cast(null as string) as {field.name}."
            )
    names = {f.name.lower() for f in fields}
    config = target.dt.config
    for key, listed in (
        ("unique_key", config.unique_key),
        ("partition_by", config.partition_by),
        ("cluster_by", config.cluster_by),
    ):
        missing = [c for c in listed if c.lower() not in names]
        if missing:
            raise RefreshError(
                f"{key} {', '.join(missing)} is not a column of its query "
                f"(its columns: {', '.join(f.name for f in fields)}). Fix {key} or the query."
            )


def create_empty(target: Target, query: str) -> List[str]:
    """Create the DT empty, with the query's columns nullable (as Spark's CTAS keeps them),
    its partitioning or clustering and its comments (docs/ARCHITECTURE.md, "Table features");
    returns the warnings about what its engine cannot do."""
    features = TableFeatures(target.engine, target.dt)
    fields = target.engine.schema_of(query).fields
    columns = ", ".join(
        f"{quote(f.name)} {f.dataType.simpleString()}{features.column_comment(f.name)}" for f in fields
    )
    return _create(target, f" ({columns})", "")


def _create(target: Target, columns: str, rows: str) -> List[str]:
    """The DT's CREATE TABLE, with ``columns`` (a column list, or nothing) before its clauses and
    ``rows`` (an AS SELECT, or nothing) after them, where whatever stood in its place is gone;
    returns the warnings about that and about what its engine cannot do."""
    engine, dt = target.engine, target.dt
    warnings = _clear_place(target)
    clauses, refused = TableFeatures(engine, dt).create_clauses()
    engine.execute(f"CREATE TABLE {dt.relation}{columns} USING delta{clauses}{rows}")
    return warnings + refused


def _clear_place(target: Target) -> List[str]:
    """Drop what stands where the DT goes and is no Delta table (a view, a parquet table: a
    model whose materialization changed), as dbt's own materializations drop a relation of
    another type before creating theirs; returns the warning saying so."""
    engine, dt = target.engine, target.dt
    entry = engine.catalog_entry(dt.schema, dt.identifier)
    if not entry:
        return []
    kind = "view" if entry.get("Type", "").upper() == "VIEW" else "table that is not a Delta table"
    engine.execute(f"DROP {'VIEW' if kind == 'view' else 'TABLE'} {dt.relation}")
    return [
        f"Model '{dt.model or dt.name}': {dt.name} was a {kind}; it was dropped and "
        "replaced by the dynamic table."
    ]


def overwrite(target: Target, query: str) -> Tuple[int, int]:
    """Replace the DT's rows with the query's in one commit, its schema and partitioning too
    where they changed (docs/ARCHITECTURE.md, "Applying"); returns (inserted, deleted)."""
    engine, dt = target.engine, target.dt
    before = target.row_count()
    if target.keeps_layout(query):
        engine.execute(f"INSERT OVERWRITE {dt.relation} SELECT * FROM ({query}) AS q")
    else:
        engine.replace_table(dt.schema, dt.identifier, query, dt.config.partition_by)
    return target.row_count(), before


def rebuild(
    engine: Engine, recorder: Recorder, refresh: Refresh, dt_log: Optional[DeltaLog]
) -> RefreshResult:
    """Recompute the DT as of the sources' versions observed, in one commit."""
    dt, observed = refresh.dt, refresh.observed
    from_scratch = refresh.definition.rebuild_reason == decide.FULL_REFRESH
    with (
        delta_query.pinned_query(
            engine,
            refresh.definition.sql,
            observed.versions,
            observed.views,
            dt.schema,
            observed.data_timestamp,
        ) as query,
        immutable_rows.rebuilt_rows(
            engine, dt, dt_log, query, observed.data_timestamp, from_scratch
        ) as pinned,
    ):
        target = Target(engine, dt)
        _check_pinned(target, refresh, pinned)
        result = _write(recorder, refresh, target, dt_log, pinned)
    for source in observed.sources:
        result.source_reads += version_reads(source.log, source.end)
    return result


def _check_pinned(target: Target, refresh: Refresh, pinned: str) -> None:
    """:func:`check_output` of the pinned query, whose failure to run, where the sources'
    columns changed since the DT consumed them, says so."""
    try:
        check_output(target, pinned)
    except RefreshError:
        raise
    except Exception as exc:
        changed = _columns_changed(refresh)
        if not changed:
            raise
        # The engine's words name a column, not why it is gone (docs/ARCHITECTURE.md,
        # "Reading sources", "Schema changes").
        raise RefreshError(
            f"its query no longer runs on its sources, whose columns changed: {changed}. "
            f"The engine said: {first_line(exc)}. Fix the model's query for the new columns "
            "and run it again (a --full-refresh alone will not help)."
        ) from exc


def _write(
    recorder: Recorder, refresh: Refresh, target: Target, dt_log: Optional[DeltaLog], pinned: str
) -> RefreshResult:
    """The DT created where it does not exist, then written: the rows that differ, or every row."""
    dt = refresh.dt
    changes = _difference(refresh, target, dt_log, pinned)
    if refresh.guarded:
        guard.check(dt, refresh.decision.action, _rebuilt_change(target, pinned, changes))
    if dt_log is None and not dt.docs.columns:
        return _created(recorder, refresh, target, pinned)
    warnings: List[str] = []
    if dt_log is None:
        warnings = create_empty(target, pinned)
        dt_log = target.engine.delta_log(dt.name)
        assert dt_log is not None
        recorder.forget(dt)
    current = recorder.metadata.frontier(dt.name)
    if changes is None:
        result = commit(recorder, refresh, dt_log, current, lambda _: overwrite(target, pinned))
    elif changes.is_empty:
        result = unchanged(recorder, refresh, dt_log)
        result.message = "recomputed: its result did not change, so the table was not written"
    else:
        writer = writer_for(target, changes)
        result = commit(
            recorder, refresh, dt_log, current, partial(writer.apply, changes), writer.carries_intent
        )
        result.message = "recomputed: wrote only the rows that differ, not the whole table"
    result.warnings += warnings
    return result


def _created(recorder: Recorder, refresh: Refresh, target: Target, query: str) -> RefreshResult:
    """The DT created holding the query's rows by one CREATE TABLE ... AS SELECT: 3 delta-spark
    jobs where creating it empty and then overwriting it ran 5 (docs/ARCHITECTURE.md, "The path
    of one refresh"). No intent goes before it: a process that dies after it leaves a DT without
    a frontier, which the next refresh rebuilds, writing only the rows that differ (none).
    Column comments go in a column list, which CTAS has not: such a DT is created empty first."""
    engine, dt = target.engine, target.dt
    failpoint("during_apply")
    warnings = _create(target, "", f" AS SELECT * FROM ({query}) AS q")
    failpoint("after_apply")
    dt_log = engine.delta_log(dt.name)
    assert dt_log is not None
    recorder.forget(dt)
    result = unchanged(recorder, refresh, dt_log)
    result.rows_inserted = Target(engine, dt, dt_log).row_count()
    result.warnings += warnings
    return result


def _difference(
    refresh: Refresh, target: Target, dt_log: Optional[DeltaLog], query: str
) -> Optional[PreparedDelta]:
    """What a rebuild the data caused (a source reloaded or re-created, AUTO's choice to
    recompute, a query that cannot be differentiated) writes: the rows that differ from the
    DT's, where they are few, so the tables reading the DT see a small change and stay
    incremental (docs/ARCHITECTURE.md, "Rewritten inputs"). None, to overwrite it, where a
    person asked for every row again (--full-refresh, a new definition), the DT's columns
    or partitioning change, or most of its rows differ."""
    reason = refresh.definition.rebuild_reason
    if dt_log is None or reason in (decide.FULL_REFRESH, DEFINITION_CHANGED):
        return None
    if not target.keeps_layout(query):
        return None
    version = dt_log.latest_version()
    limit = min(NET_CHANGE_MAX_ROWS, max(DIFFERENCE_MIN_ROWS, (dt_log.row_count(version) or 0) // 2))
    # The DT read as a source version is, from its files where the engine reads a small table
    # faster so: delta-spark would load the DT's new snapshot first, about 1 s of a small DT's
    # recompute (docs/ARCHITECTURE.md, "Rewritten inputs").
    with VersionedRelations(target.engine.spark, target.engine.capabilities) as relations:
        return difference(target, query, limit, relations.latest(target.dt.relation, dt_log))


def _rebuilt_change(target: Target, query: str, changes: Optional[PreparedDelta]) -> guard.Change:
    """What a rebuild changes, for the change fuse: the difference's rows where it writes only
    those, else the net change in row count (one more engine job counting the query's rows)."""
    held = target.row_count()
    if changes is not None:
        return guard.Change(held, changes.inserted, changes.deleted)
    computed = target.rows_of(f"({query})")
    return guard.Change(held, max(computed - held, 0), max(held - computed, 0))


def _columns_changed(refresh: Refresh) -> str:
    """The sources whose columns changed since the DT's frontier consumed them, each with the
    change in words ("s.orders (dropped amount)"); empty when none did."""
    if refresh.frontier is None:
        return ""
    changed = []
    for source in refresh.observed.sources:
        consumed = refresh.frontier.sources.get(source.name)
        change = source.log.columns_changed(consumed.version, source.end) if consumed else None
        if change is not None:
            changed.append(f"{source.name} ({change})")
    return "; ".join(changed)
