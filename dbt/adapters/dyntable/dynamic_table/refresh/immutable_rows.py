"""Immutable rows in a refresh (docs/ARCHITECTURE.md, "Immutable rows"): what a rebuild writes
and which delta rows an incremental refresh applies, given the DT's `immutable_where`."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime
from typing import Iterator, List, Optional, Tuple

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import StructType

from dbt.adapters.dyntable.changes import VersionedRelations
from dbt.adapters.dyntable.delta_log import DeltaLog
from dbt.adapters.dyntable.dynamic_table.immutable_where import (
    backfilled,
    kept_and_recomputed,
    region,
    unknown_columns,
)
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable, RefreshError
from dbt.adapters.dyntable.engines.base import Engine
from dbt.adapters.dyntable.vocabulary import WEIGHT, first_line

#: The column a staged delta row carries while its region is decided.
IMMUTABLE = "_dyn_immutable"


@contextmanager
def rebuilt_rows(
    engine: Engine,
    dt: DynamicTable,
    dt_log: Optional[DeltaLog],
    query: str,
    data_timestamp: datetime,
    from_scratch: bool,
) -> Iterator[str]:
    """The rows a rebuild of ``dt`` writes, as SQL valid inside the ``with``: ``query``'s, except
    that with `immutable_where` a rebuild keeps the DT's immutable rows, and a first build copies
    them from `backfill_from` when set. The first build without a backfill, ``from_scratch``
    (`--full-refresh`) and a new output schema (old rows cannot be kept) compute every row."""
    condition = dt.config.immutable_where
    if condition is None or from_scratch:
        yield query
        return
    predicate = region(condition, data_timestamp)
    schema = engine.schema_of(query)
    _check_columns(condition, schema.fieldNames())
    if dt_log is None:
        backfill = dt.config.backfill_from
        if backfill is None:
            yield query
        else:
            yield backfilled(predicate, _readable(engine, dt, backfill, schema), query, schema)
        return
    held = [(f.name.lower(), f.dataType) for f in dt_log.schema_at(dt_log.latest_version()).fields]
    if held != [(f.name.lower(), f.dataType) for f in schema.fields]:
        yield query
        return
    with VersionedRelations(engine.spark, engine.capabilities) as relations:
        current = relations.relation(dt.relation, dt_log, dt_log.latest_version())
        yield kept_and_recomputed(predicate, current, query, schema.fieldNames())


def _check_columns(condition: str, columns: List[str]) -> None:
    """Refuse an `immutable_where` that names a column its query does not have."""
    shown = [c for c in columns if c != WEIGHT]
    missing = unknown_columns(condition, shown)
    if missing:
        raise RefreshError(
            f"immutable_where {condition} names {', '.join(missing)}, which is not a column of its "
            f"query (its columns: {', '.join(shown)}). Fix immutable_where or the query."
        )


def _readable(engine: Engine, dt: DynamicTable, backfill: str, schema: StructType) -> str:
    """``backfill`` qualified by the DT's schema when it names none, once it is known to hold the
    query's columns."""
    name = backfill if "." in backfill else f"{dt.schema}.{backfill}"
    try:
        columns = {c.lower() for c in engine.schema_of(f"SELECT * FROM {name}").fieldNames()}
    except Exception as exc:
        raise RefreshError(
            f"backfill_from {name} cannot be read ({first_line(exc)}). "
            "Create that table, or fix backfill_from."
        ) from exc
    missing = [f.name for f in schema.fields if f.name.lower() not in columns]
    if missing:
        raise RefreshError(
            f"backfill_from {name} lacks the column(s) {', '.join(missing)} of the "
            "model's query. Backfill from a table with the model's columns."
        )
    return name


@contextmanager
def mutable_delta(
    engine: Engine, dt: DynamicTable, delta_sql: str, data_timestamp: datetime
) -> Iterator[Tuple[str, int]]:
    """The delta without its rows in the immutable region, valid inside the ``with``, and how
    many row changes (inserted plus deleted copies) were left out for being there. The delta is
    read once, into this process, so the count and the rows applied come from one evaluation."""
    if dt.config.immutable_where is None:
        yield delta_sql, 0
        return
    predicate = region(dt.config.immutable_where, data_timestamp)
    try:
        rows = engine.arrow(f"SELECT *, {predicate} AS {IMMUTABLE} FROM ({delta_sql}) AS d")
    except Exception:
        # The engine's words would name a column, not the config key that reads it.
        _check_columns(dt.config.immutable_where, engine.schema_of(delta_sql).fieldNames())
        raise
    inside = rows.column(IMMUTABLE)
    ignored = int(pc.sum(pc.abs(rows.column(WEIGHT).filter(inside))).as_py() or 0)
    kept: pa.Table = rows.filter(pc.invert(inside)).drop_columns([IMMUTABLE])
    if kept.num_rows == 0:  # Spark builds no view of no rows; an empty query has the columns
        yield f"SELECT * FROM ({delta_sql}) AS d WHERE FALSE", ignored
        return
    with engine.temporary_view(kept) as view:
        yield f"SELECT * FROM {view}", ignored
