"""Checking the semantics contract: a DT equals its query at its data timestamp (DESIGN §2.1).

The oracle evaluates the DT's defining query with every source pinned to the version its frontier
recorded (views expanded; upstream DTs at the version their refresh produced) and checks that each
base-table version is the latest committed at or before the data timestamp. Both sides are
compared as multisets. Tests, the demo and `dyntable` use this one check.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Tuple

from dbt.adapters.dyntable.changes import VersionedRelations
from dbt.adapters.dyntable.delta_log import DeltaLog
from dbt.adapters.dyntable.dynamic_table.metadata import Frontier, MetadataStore
from dbt.adapters.dyntable.dynamic_table.pinning import pin_query

if TYPE_CHECKING:
    from dbt.adapters.dyntable.engines.base import Engine


#: Significant digits floating-point values are compared at: a sum of doubles depends on the order
#: Spark adds them in, so a recomputation and an incrementally maintained sum differ in the last bits.
FLOAT_DIGITS = 12


def multiset(rows: Iterable[Any]) -> "Counter[Tuple[Any, ...]]":
    """Rows as a multiset, with floats rounded to :data:`FLOAT_DIGITS` significant digits."""
    return Counter(
        tuple(float(f"{v:.{FLOAT_DIGITS}g}") if isinstance(v, float) else v for v in row) for row in rows
    )


@dataclass
class DvsCheck:
    name: str
    ok: bool
    rows: int
    detail: str
    frontier: Optional[Frontier]


def check_dvs(
    engine: "Engine",
    metadata: MetadataStore,
    name: str,
    views_of: Optional[Callable[[str, str], dict]] = None,
) -> DvsCheck:
    """Compare DT ``name`` (``schema.table``) with its recorded definition at its frontier."""
    frontier = metadata.frontier(name)
    if frontier is None:
        return DvsCheck(name, False, 0, "no frontier recorded", None)
    if frontier.pending is not None:
        return DvsCheck(name, False, 0, "a refresh intent is unresolved", frontier)
    schema = name.split(".", 1)[0]
    upstream = set(metadata.frontiers())
    t_ms = int(frontier.data_timestamp.timestamp() * 1000)
    for source, version in frontier.source_versions.items():
        if source in upstream:
            continue
        source_schema, table = source.split(".", 1)
        location = engine.table_location(source_schema, table)
        at_t = DeltaLog(location).version_at(t_ms) if location else None
        if at_t != version:
            return DvsCheck(
                name, False, 0,
                f"read {source} at version {version}, but its version at the data timestamp is {at_t}",
                frontier,
            )
    views = views_of(frontier.definition, schema) if views_of else {}
    actual = multiset(engine.spark.sql(f"SELECT * FROM {name}").collect())
    with VersionedRelations(engine.spark, engine.capabilities) as relations:
        expected_sql = pin_query(
            frontier.definition, frontier.source_versions, views, schema,
            read_at=lambda source, version: relations.view(_log_of(engine, source), version),
        )
        expected = multiset(engine.spark.sql(expected_sql).collect())
    if actual != expected:
        missing, extra = expected - actual, actual - expected
        return DvsCheck(
            name, False, sum(actual.values()),
            f"{sum(extra.values())} rows only in the DT (e.g. {list(extra)[:2]}), "
            f"{sum(missing.values())} only in the query (e.g. {list(missing)[:2]})",
            frontier,
        )
    return DvsCheck(name, True, sum(actual.values()), "equal", frontier)


def _log_of(engine: "Engine", name: str) -> Optional[DeltaLog]:
    location = engine.table_location(*name.split(".", 1))
    return DeltaLog(location) if location else None
