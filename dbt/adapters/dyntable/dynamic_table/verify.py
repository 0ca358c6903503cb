"""Checking the semantics contract: a DT equals its query at its data timestamp
(docs/ARCHITECTURE.md, "The semantics contract").

The oracle evaluates the DT's defining query with every source pinned to the version its frontier
recorded (views expanded; upstream DTs at the version their refresh produced) and checks that each
base-table version is the latest committed at or before the data timestamp. Both sides are
compared as multisets. Tests, the demo and `dyntable` use this one check.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Iterable, Optional, Tuple

from dbt.adapters.dyntable.dynamic_table.immutability import region
from dbt.adapters.dyntable.dynamic_table.lifecycle import SourceRead
from dbt.adapters.dyntable.dynamic_table.metadata import Frontier, MetadataStore
from dbt.adapters.dyntable.dynamic_table.pinning import read_views
from dbt.adapters.dyntable.dynamic_table.refresh.derive import pinned_query
from dbt.adapters.dyntable.engines.base import Engine
from dbt.adapters.dyntable.vocabulary import quoted_table

#: Significant digits floating-point values are compared at: a sum of doubles depends on the order
#: Spark adds them in, so a recomputation and an incrementally maintained sum differ in the last bits.
FLOAT_DIGITS = 12


def multiset(rows: Iterable[Any]) -> "Counter[Tuple[Any, ...]]":
    """Rows as a multiset of comparable values: floats rounded to :data:`FLOAT_DIGITS`
    significant digits, decimals normalized, arrays, structs and maps as tuples, binary as bytes.

    >>> multiset([(0.1 + 0.2, [1, 2], {"b": 2, "a": 1}, bytearray(b"x"))])
    Counter({(0.3, (1, 2), (('a', 1), ('b', 2)), b'x'): 1})
    """
    return Counter(tuple(comparable(v) for v in row) for row in rows)


def comparable(value: Any) -> Any:
    """``value`` as a hashable value equal to any other reading of the same stored value."""
    if isinstance(value, float):
        return float(f"{value:.{FLOAT_DIGITS}g}")
    if isinstance(value, Decimal):
        return value.normalize()
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, dict):
        return tuple(sorted((k, comparable(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):  # arrays, and structs (pyspark Rows are tuples)
        return tuple(comparable(v) for v in value)
    return value


@dataclass
class DvsCheck:
    name: str
    ok: bool
    rows: int
    detail: str
    frontier: Optional[Frontier]


def check_dvs(
    engine: Engine, metadata: MetadataStore, name: str, immutable_where: Optional[str] = None
) -> DvsCheck:
    """Compare DT ``name`` (``schema.table``) with its recorded definition at its frontier; with
    ``immutable_where``, outside that region only (docs/ARCHITECTURE.md, "Immutable rows")."""
    frontier = metadata.frontier(name)
    if frontier is None:
        return DvsCheck(name, False, 0, "no frontier recorded", None)
    if frontier.pending is not None:
        return DvsCheck(name, False, 0, "a refresh intent is unresolved", frontier)
    schema = name.split(".", 1)[0]
    problem = _sources_problem(engine, frontier)
    if problem is not None:
        return DvsCheck(name, False, 0, problem, frontier)
    views = read_views(engine, frontier.definition, schema)
    mutable = ""
    if immutable_where is not None:
        mutable = f" WHERE NOT {region(immutable_where, frontier.data_timestamp)}"
    actual = multiset(engine.execute(f"SELECT * FROM {quoted_table(name)} AS t{mutable}").collect())
    with pinned_query(engine, frontier.definition, frontier.source_versions, views, schema) as expected_sql:
        expected = multiset(engine.execute(f"SELECT * FROM ({expected_sql}) AS q{mutable}").collect())
    if actual != expected:
        missing, extra = expected - actual, actual - expected
        return DvsCheck(
            name,
            False,
            sum(actual.values()),
            f"{sum(extra.values())} rows only in the DT (e.g. {list(extra)[:2]}), "
            f"{sum(missing.values())} only in the query (e.g. {list(missing)[:2]})",
            frontier,
        )
    return DvsCheck(name, True, sum(actual.values()), "equal", frontier)


def _sources_problem(engine: Engine, frontier: Frontier) -> Optional[str]:
    """What is wrong with the versions the frontier says were read: each must still be the commit
    recorded, and a base table read as of T must have been at that version at T."""
    t_ms = int(frontier.data_timestamp.timestamp() * 1000)
    for source, consumed in frontier.sources.items():
        log = engine.delta_log(source)
        if log is None:
            return f"{source} no longer exists"
        lost = log.lost_commit(consumed.version, consumed.commit)
        if lost is not None:
            return f"{source}: {lost}"
        if consumed.read is SourceRead.AS_OF and log.version_at(t_ms) != consumed.version:
            return (
                f"read {source} at version {consumed.version}, but its version at the data "
                f"timestamp is {log.version_at(t_ms)}"
            )
    return None
