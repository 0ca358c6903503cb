"""Checking the semantics contract: a DT equals its query at its data timestamp
(docs/ARCHITECTURE.md, "The semantics contract" and "Verifying").

The oracle evaluates the DT's defining query with every source pinned to the version its frontier
recorded (views expanded; upstream DTs at the version their refresh produced) and checks that each
base-table version is the latest committed at or before the data timestamp. Both sides are
compared as multisets, in one of two ways:

* :func:`check_dvs` collects both into this process and compares them exactly, naming rows that
  differ: tests and the demo use it;
* :func:`verify` compares them in the engine by an order-independent multiset hash (the row count
  and the sum of a 64-bit hash of each row), on the whole table or a deterministic sample of it:
  the ``verify`` config, ``dyntable verify`` and the ``dynamic_table_matches_query`` test use it.
"""

from __future__ import annotations

import zlib
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Iterable, Iterator, List, Optional, Sequence, Tuple

from pyspark.sql.types import DataType, DoubleType, FloatType, MapType, StructField

from dbt.adapters.dyntable.dynamic_table.immutable_where import region
from dbt.adapters.dyntable.dynamic_table.lifecycle import SourceRead
from dbt.adapters.dyntable.dynamic_table.metadata import Frontier, MetadataStore
from dbt.adapters.dyntable.dynamic_table.pinning import read_views
from dbt.adapters.dyntable.dynamic_table.refresh.delta_query import pinned_query
from dbt.adapters.dyntable.engines.base import Engine
from dbt.adapters.dyntable.vocabulary import quote, quoted_table

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


class VerifyFailed(RuntimeError):
    """A refreshed DT does not equal its query (``verify_failure: error``); the message names the
    model, the counts and the fix."""


@dataclass
class DvsCheck:
    """How a DT compared with its query: ``ok`` (equal), or ``detail`` says why not; ``compared``
    is False when the check could not run (no frontier, a source's version gone, ...)."""

    name: str
    ok: bool
    rows: int
    detail: str
    frontier: Optional[Frontier]
    compared: bool = True


def check_dvs(
    engine: Engine, metadata: MetadataStore, name: str, immutable_where: Optional[str] = None
) -> DvsCheck:
    """Compare DT ``name`` (``schema.table``) with its recorded definition at its frontier, row by
    row in this process; with ``immutable_where``, outside that region only (docs/ARCHITECTURE.md,
    "Immutable rows")."""
    with _pinned(engine, metadata, name) as pinned:
        if isinstance(pinned, DvsCheck):
            return pinned
        frontier, expected_sql = pinned
        mutable = _mutable(immutable_where, frontier)
        actual = multiset(engine.execute(f"SELECT * FROM {quoted_table(name)} AS t{mutable}").collect())
        expected = multiset(engine.execute(f"SELECT * FROM ({expected_sql}) AS q{mutable}").collect())
    rows = sum(actual.values())
    if actual != expected:
        missing, extra = expected - actual, actual - expected
        return DvsCheck(
            name,
            False,
            rows,
            f"{sum(extra.values())} rows only in the DT (e.g. {list(extra)[:2]}), "
            f"{sum(missing.values())} only in the query (e.g. {list(missing)[:2]})",
            frontier,
        )
    return DvsCheck(name, True, rows, "equal", frontier)


#: ``verify: sample`` compares the rows whose key (or, without one, whole row) hashes to one of
#: this many buckets; which one follows from the data timestamp, so successive refreshes check
#: different parts of the table and a check at one timestamp is repeatable.
SAMPLE_BUCKETS = 16


def verify(
    engine: Engine,
    metadata: MetadataStore,
    name: str,
    mode: str,
    key: Optional[Sequence[str]] = None,
    immutable_where: Optional[str] = None,
) -> DvsCheck:
    """Compare DT ``name`` with its query at its frontier in the engine, by multiset hash:
    ``mode`` ``full`` over every row, ``sample`` over the rows whose ``key`` columns (the whole
    row without them) hash to the data timestamp's bucket; with ``immutable_where``, outside that
    region only. ``detail`` is what the refresh history records: ``equal (...)``,
    ``MISMATCH (...): ...`` or ``not verified: ...``."""
    with _pinned(engine, metadata, name) as pinned:
        if isinstance(pinned, DvsCheck):
            pinned.detail = f"not verified: {pinned.detail}"
            return pinned
        frontier, expected_sql = pinned
        table = f"SELECT * FROM {quoted_table(name)}"
        fields = engine.schema_of(table).fields
        query_fields = engine.schema_of(expected_sql).fields
        if _signature(fields) != _signature(query_fields):
            return DvsCheck(
                name,
                False,
                0,
                f"MISMATCH ({mode}): the table's columns ({_columns_text(fields)}) are not its "
                f"query's ({_columns_text(query_fields)})",
                frontier,
            )
        where, scope = _compared_rows(fields, frontier, mode, key, immutable_where)
        row_hash = f"CAST(xxhash64({_hashed(fields)}) AS DECIMAL(38, 0))"

        def digest(sql: str) -> str:
            # The aggregate reads the rows' hashes only, never a column of the query: Sail 0.7
            # cannot plan an aggregate over a grouped count(*) it answers from Delta statistics
            # (docs/ARCHITECTURE.md, "Verifying").
            hashes = f"SELECT {row_hash} AS h FROM ({sql}) AS v{where}"
            return f"SELECT count(*) AS n, coalesce(sum(h), 0) AS h FROM ({hashes}) AS r"

        both = engine.execute(
            f"SELECT t.n AS dt_rows, t.h AS dt_hash, q.n AS query_rows, q.h AS query_hash "
            f"FROM ({digest(table)}) AS t CROSS JOIN ({digest(expected_sql)}) AS q"
        ).collect()[0]
    rows, query_rows = int(both["dt_rows"]), int(both["query_rows"])
    if (rows, both["dt_hash"]) == (query_rows, both["query_hash"]):
        return DvsCheck(name, True, rows, f"equal ({scope}, {rows:,} rows)", frontier)
    differ = "the same number of rows with different contents" if rows == query_rows else "different rows"
    return DvsCheck(
        name,
        False,
        rows,
        f"MISMATCH ({scope}): the table holds {rows:,} rows, its query {query_rows:,} ({differ})",
        frontier,
    )


def _compared_rows(
    fields: Sequence[StructField],
    frontier: Frontier,
    mode: str,
    key: Optional[Sequence[str]],
    immutable_where: Optional[str],
) -> Tuple[str, str]:
    """The `` WHERE`` of the rows :func:`verify` compares (nothing for all of them) and how its
    detail names them."""
    where, scope = _mutable(immutable_where, frontier), "full"
    if mode == "sample":
        bucket = zlib.crc32(frontier.data_timestamp.isoformat().encode()) % SAMPLE_BUCKETS
        named = {f.name.lower(): f for f in fields}
        keyed = [named[k.lower()] for k in key or () if k.lower() in named] or list(fields)
        sampled = f"pmod(xxhash64({_hashed(keyed)}), {SAMPLE_BUCKETS}) = {bucket}"
        where = f"{where} AND {sampled}" if where else f" WHERE {sampled}"
        scope = f"sample: bucket {bucket} of {SAMPLE_BUCKETS} by {_columns_text(keyed, types=False)}"
    if immutable_where is not None:
        scope += ", mutable rows"
    return where, scope


def _mutable(immutable_where: Optional[str], frontier: Frontier) -> str:
    """`` WHERE`` the rows outside the immutable region at the frontier's data timestamp, or
    nothing (docs/ARCHITECTURE.md, "Immutable rows")."""
    if immutable_where is None:
        return ""
    return f" WHERE NOT {region(immutable_where, frontier.data_timestamp)}"


@contextmanager
def _pinned(engine: Engine, metadata: MetadataStore, name: str) -> Iterator[Any]:
    """The DT's frontier and its query pinned at the frontier's versions, valid inside the
    ``with``; or the check that failed before anything could be compared."""
    frontier = metadata.frontier(name)
    if frontier is None:
        yield DvsCheck(name, False, 0, "no frontier recorded", None, compared=False)
        return
    if frontier.pending is not None:
        yield DvsCheck(name, False, 0, "a refresh intent is unresolved", frontier, compared=False)
        return
    problem = _sources_problem(engine, frontier)
    if problem is not None:
        yield DvsCheck(name, False, 0, problem, frontier, compared=False)
        return
    schema = name.split(".", 1)[0]
    views = read_views(engine, frontier.definition, schema)
    with pinned_query(
        engine, frontier.definition, frontier.source_versions, views, schema, frontier.data_timestamp
    ) as expected_sql:
        yield frontier, expected_sql


def _hashed(fields: Sequence[StructField]) -> str:
    """The arguments of a row's hash: per column whether it is NULL (Spark's hash skips NULLs, so
    ``(1, NULL)`` and ``(NULL, 1)`` would collide) and its value, as :func:`comparable` reads it:
    floating point at :data:`FLOAT_DIGITS` significant digits, zero (and -0.0) as ``0``, which the
    embedded engine formats wrongly (docs/ARCHITECTURE.md, "Verifying"); a value holding a map as
    JSON (Spark hashes no maps)."""
    parts: List[str] = []
    for field in fields:
        column = quote(field.name)
        value = column
        if isinstance(field.dataType, (DoubleType, FloatType)):
            double = f"CAST({column} AS DOUBLE)"
            formatted = f"format_string('%.{FLOAT_DIGITS - 1}e', {double})"
            value = f"CASE WHEN {double} = 0 THEN '0' ELSE {formatted} END"
        elif _holds_map(field.dataType):
            value = f"to_json({column})"
        parts += [f"isnull({column})", value]
    return ", ".join(parts)


def _holds_map(data_type: DataType) -> bool:
    if isinstance(data_type, MapType):
        return True
    children = getattr(data_type, "fields", None) or [getattr(data_type, "elementType", None)]
    return any(_holds_map(getattr(c, "dataType", c)) for c in children if c is not None)


def _signature(fields: Sequence[StructField]) -> List[Tuple[str, str]]:
    return [(f.name.lower(), f.dataType.simpleString()) for f in fields]


def _columns_text(fields: Sequence[StructField], types: bool = True) -> str:
    return ", ".join(f"{f.name} {f.dataType.simpleString()}" if types else f.name for f in fields)


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
