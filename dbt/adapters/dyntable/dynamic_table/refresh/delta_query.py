"""Stage 3, derive: the SQL a refresh runs (docs/ARCHITECTURE.md, "Deriving").

An incremental refresh runs the plan's delta query over the sources' changed Delta files, with the
DT's stored rows where rules read them; a rebuild runs the query with every source pinned to its
version. ``explain`` renders the same delta, with the sources named symbolically.
"""

from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime
from typing import Callable, Iterator, Mapping, NamedTuple, Sequence, Union

from dbt.adapters.dyntable.changes import FileSetResolver, SourceReads, VersionedRelations, ViewNames
from dbt.adapters.dyntable.delta_log import DeltaLog
from dbt.adapters.dyntable.differentiation import DeltaQuery, differentiate
from dbt.adapters.dyntable.differentiation.explain import SymbolicResolver, report
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.pinning import pin_query
from dbt.adapters.dyntable.dynamic_table.refresh.facts import SourceState
from dbt.adapters.dyntable.dynamic_table.refresh.planned_query import NotPlanned, PlannedQuery
from dbt.adapters.dyntable.dynamic_table.refresh.target import Target
from dbt.adapters.dyntable.engines.base import Engine


class Derived(NamedTuple):
    """A refresh's delta query, and what SQL built from it reads of the sources."""

    query: DeltaQuery
    reads: Callable[[str], SourceReads]


@contextmanager
def delta_query(
    engine: Engine,
    dt: DynamicTable,
    planned: PlannedQuery,
    sources: Sequence[SourceState],
    dt_log: DeltaLog,
    checked_fold: bool = True,
) -> Iterator[Derived]:
    """The delta of ``planned`` over each source's interval, valid inside the ``with``; its
    stored groups folded with a check where the DT may recompute and ``checked_fold`` (else
    their touched groups rescanned). Called under the DT's refresh lock: the views it reads keep
    their names (:class:`ViewNames`)."""
    versions = {}
    for source in sources:
        assert source.start is not None, "decide() rebuilds a DT with a new source"
        versions[source.name] = (source.log, source.start, source.end)
    resolver = FileSetResolver(
        engine.spark,
        versions,
        intervals={s.name: s.interval for s in sources if s.interval is not None},
        capabilities=engine.capabilities,
        names=ViewNames.kept(dt.name),
        measured={s.name: s.net.rows for s in sources if s.net is not None and s.net.rows is not None},
    )
    try:
        checked = checked_fold and dt.config.recomputes_when_unsure
        stored = resolver.stored(dt.relation, dt_log)
        # Typed as the DT stores its rows, the delta is consolidated as the DT will hold it.
        types = Target(engine, dt, dt_log).types()
        yield Derived(differentiate(planned.plan, resolver, stored, checked, types), resolver.reads)
    finally:
        resolver.close()


@contextmanager
def pinned_query(
    engine: Engine,
    sql: str,
    versions: Mapping[str, int],
    views: Mapping[str, str],
    schema: str,
    data_timestamp: datetime,
) -> Iterator[str]:
    """``sql`` as of ``data_timestamp``: every source read at its version, the clock at that
    instant; valid inside the ``with``."""
    with VersionedRelations(engine.spark, engine.capabilities) as relations:
        yield pin_query(
            sql,
            versions,
            views,
            schema,
            read_at=lambda name, version: relations.view(engine.delta_log(name), version),
            data_timestamp=data_timestamp,
        )


def explain(dt: DynamicTable, planned: Union[PlannedQuery, NotPlanned]) -> str:
    """How ``dt`` refreshes: the plan, the formula at each node, the row key and the delta SQL
    its refreshes run, or why it refreshes FULL."""
    fuse = _fuse(dt) + _immutable(dt) + _verify(dt)
    if isinstance(planned, NotPlanned):
        if planned.cause is None:
            return (
                f"{dt.name} refreshes FULL: its refresh_mode is 'full', so every refresh whose "
                f"sources changed recomputes the whole query (unchanged sources: NO_DATA).{fuse}"
            )
        return (
            f"{dt.name} refreshes FULL (refresh_mode {dt.config.refresh_mode}): its query is "
            f"not incrementalizable: {planned.cause}{fuse}"
        )
    delta = differentiate(planned.plan, SymbolicResolver(), dt.relation, dt.config.recomputes_when_unsure)
    return f"{dt.name}\noutput key: {planned.key.describe()}{fuse}\n{report(planned.plan, delta)}"


def _fuse(dt: DynamicTable) -> str:
    """The change fuse's limits, as a line of the report (docs/ARCHITECTURE.md, "Change fuse")."""
    limits = [
        f"{key} {value:g}"
        for key, value in (
            ("max_change_ratio", dt.config.max_change_ratio),
            ("max_change_rows", dt.config.max_change_rows),
        )
        if value is not None
    ]
    return f"\nchange fuse: {', '.join(limits)} (a larger change is not applied)" if limits else ""


def _immutable(dt: DynamicTable) -> str:
    """The immutable region, as a line of the report (docs/ARCHITECTURE.md, "Immutable rows")."""
    if dt.config.immutable_where is None:
        return ""
    backfill = f"; first built from {dt.config.backfill_from}" if dt.config.backfill_from else ""
    return (
        f"\nimmutable where: {dt.config.immutable_where} (at the data timestamp; refreshes never "
        f"change rows there{backfill})"
    )


def _verify(dt: DynamicTable) -> str:
    """The ``verify`` config, as a line of the report (docs/ARCHITECTURE.md, "Verifying")."""
    if dt.config.verify is None:
        return ""
    on_mismatch = "the refresh fails" if dt.config.verify_failure == "error" else "a warning"
    return f"\nverify: {dt.config.verify} after each refresh that writes it (on a mismatch: {on_mismatch})"
