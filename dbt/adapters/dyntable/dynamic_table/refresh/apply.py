"""Stage 4, apply: a delta staged and validated in this process, then written by one commit
(``write.py`` chooses the writer).

A delta arrives in Z-set form: the DT's columns plus ``_dyn_weight`` (+n inserts n copies of the
row, -n deletes n copies), one row per distinct tuple. The DT itself holds plain rows with no
hidden columns, so ``SELECT * FROM dt`` is the query's result as a multiset. A MERGE cannot delete
"k of n identical rows", so for every tuple the delta touches the merge deletes all its copies and
inserts back ``old + weight`` of them; ``old`` is read from the DT for the touched tuples only.
An insert-only delta, the common case for appends through filters and joins, is a plain INSERT
that never reads the DT.

With a row key (group keys, distinct rows, a top-1 partition, or a key the project declares), the
DT holds at most one row per key and the merge matches on the key alone: a deleted row is the row
stored under its key, even when its non-key values (a sum of doubles, say) were recomputed with
different rounding. A key the plan proves is applied by one MERGE whose source the engine
computes and checks itself (:meth:`EngineWriter.merge_on_key`); inserts under stored groups of
count, sum, min and max by one MERGE folding their partials into the groups (``Writer.accumulate``).

Before the MERGE (docs/ARCHITECTURE.md, "Applying"): the delta must be consolidated (no tuple twice)
and must never delete more copies of a tuple (a keyed row) than the DT holds; with a key, no key may
hold two rows, before or after. A violation of a key the plan proves, or of the rest, fails the
refresh and leaves the DT untouched. A declared key is a promise the data may break (a failing
unique test): then the rows are matched whole, which is right for any multiset, and the refresh says
so in a warning.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dbt.adapters.dyntable.changes import groupable
from dbt.adapters.dyntable.differentiation.aggregate import UNFOLDABLE, Accumulation
from dbt.adapters.dyntable.dynamic_table.lifecycle import Action
from dbt.adapters.dyntable.dynamic_table.refresh import held_rows
from dbt.adapters.dyntable.dynamic_table.refresh.strategy import appends, counts_held_rows_here
from dbt.adapters.dyntable.dynamic_table.refresh.target import Target
from dbt.adapters.dyntable.vocabulary import ENGINE_CHECK, WEIGHT, null_safe_match, quote

OLD = "_dyn_old"
#: Per row of a rebuild's difference: the copies of it the query computes (``difference``).
NEW = "_dyn_new"
KIND = "_dyn_kind"
#: Per row key, computed by the engine (or in this process where the key has no struct, array or
#: map, which Arrow cannot group by: ``held_rows``): the most rows the DT holds under the key, the
#: delta's summed weight for it, and the row's rank within it (deletes first), so one row stands
#: for its key.
KEY_OLD, KEY_WEIGHT, KEY_RANK = "_dyn_key_old", "_dyn_key_weight", "_dyn_key_rank"
PER_KEY = (KEY_OLD, KEY_WEIGHT, KEY_RANK)
#: Rows of the delta holding the same tuple (1 when consolidated), and a marker of a DT row.
COPIES, PRESENT = "_dyn_copies", "_dyn_present"
#: The most distinct values of a key column a MERGE's condition lists (``key_bounds``); beyond
#: them, their range. Delta's and deltalake's file skipping evaluate such a list value by value.
BOUND_VALUES = 20
#: A DT at least this large has a delta's rows staged before the DT is read for them, so that
#: read is bounded by them (``_staged``); below it, one engine job reading the whole DT is cheaper.
BOUNDED_STAGING_BYTES = 8 << 20

#: What each check a statement makes of a delta (``vocabulary.failed_check``) found when it fails.
ENGINE_CHECKS = {
    "weight-0": "the delta has rows of weight 0",
    "key-twice": "a key of ({key}) would hold two rows",
    "not-held": "the delta deletes rows the table does not hold",
    "not-positive": "an appended row has a weight below 1",
    UNFOLDABLE: (
        "a change took away a group's least or greatest value, or its last non-null summand, or "
        "may have emptied it, which its stored row cannot tell"
    ),
}
#: How a user recovers a DT whose delta failed validation.
FULL_REFRESH_FIX = "Run `dbt run --full-refresh -s <model>` to rebuild it."


class DeltaValidationError(RuntimeError):
    """A delta failed a production validation; the DT was not touched. ``detail`` says which."""

    action = Action.INCREMENTAL
    reason = "delta validation failed"

    def __init__(self, detail: str, fix: str = FULL_REFRESH_FIX, check: Optional[str] = None) -> None:
        super().__init__(f"the refresh stopped before touching the table: {detail}. {fix}")
        self.detail = detail
        #: The check a statement failed (an ``ENGINE_CHECKS`` code), where one did.
        self.check = check


@contextmanager
def engine_checks(key: Sequence[str] = ()) -> Iterator[None]:
    """A statement inside that fails a check it makes (``vocabulary.failed_check``) raises
    :class:`DeltaValidationError`, saying what the check found (of the row ``key``)."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - only a check's failure is translated
        text = str(exc)
        for code, detail in ENGINE_CHECKS.items():
            if f"{ENGINE_CHECK} {code}" in text:
                raise DeltaValidationError(detail.format(key=", ".join(key)), check=code) from None
        raise


@dataclass
class PreparedDelta:
    columns: List[str]
    rows: pa.Table  # columns + weight + old multiplicity (of the tuple, or of the key) in the DT
    key: Optional[List[str]] = None  # the row key the DT is matched on; None: the whole row
    warning: Optional[str] = None  # a declared key the data breaks, so whole rows were matched

    @property
    def is_empty(self) -> bool:
        return bool(self.rows.num_rows == 0)

    @property
    def inserted(self) -> int:
        weights = self.rows.column(WEIGHT)
        return int(pc.sum(pc.if_else(pc.greater(weights, 0), weights, 0)).as_py() or 0)

    @property
    def deleted(self) -> int:
        weights = self.rows.column(WEIGHT)
        return int(-(pc.sum(pc.if_else(pc.less(weights, 0), weights, 0)).as_py() or 0))

    def deletes(self) -> pa.Table:
        """The DT's rows applying the delta deletes: every copy of each touched tuple the DT
        holds, or with a row key, the row stored under each key the delta deletes."""
        rows = self.rows
        if self.key is None:
            return rows.filter(pc.greater(rows.column(OLD), 0))
        # One delete per key: the stored row under it (deletes rank first within a key).
        first = pc.equal(rows.column(KEY_RANK), 1)
        held = pc.and_(pc.less(rows.column(WEIGHT), 0), pc.greater(rows.column(OLD), 0))
        return rows.filter(pc.and_(first, held))


@dataclass(frozen=True)
class Changes:
    """What one commit writes for a :class:`PreparedDelta`, in the DT's spelling: the rows it
    deletes, the rows it inserts (old + weight copies of each touched tuple; with a row key, the
    delta's inserts), and the condition matching a delete (``s``) to the DT's row (``t``)."""

    columns: List[str]
    deletes: pa.Table
    inserts: pa.Table
    on: str

    def merge_source(self) -> pa.Table:
        """The deletes and inserts as one MERGE's source, each marked in ``KIND``."""
        return pa.concat_tables(
            [
                self.deletes.append_column(KIND, pa.array(["D"] * self.deletes.num_rows, pa.string())),
                self.inserts.append_column(KIND, pa.array(["I"] * self.inserts.num_rows, pa.string())),
            ]
        )


def changes(target: Target, delta: PreparedDelta) -> Changes:
    rows, columns = delta.rows, target.spelled(delta.columns)
    copies = pc.add(rows.column(OLD), rows.column(WEIGHT)) if delta.key is None else rows.column(WEIGHT)
    deletes = delta.deletes().select(delta.columns).rename_columns(columns)
    inserts = _repeated(rows, copies).select(delta.columns).rename_columns(columns)
    match = target.spelled(delta.key) if delta.key is not None else columns
    on = [null_safe_match(match, "t", "s"), f"s.{KIND} = 'D'", *key_bounds(deletes, match, "t")]
    return Changes(columns, deletes, inserts, " AND ".join(on))


def key_bounds(rows: pa.Table, columns: Sequence[str], alias: str) -> List[str]:
    """Conditions on ``alias`` every row matching one of ``rows`` on ``columns`` meets: per
    integer or date column, its values (up to ``BOUND_VALUES``, else their range) or NULL.
    Redundant in a MERGE's condition, they let deltalake and Delta skip the DT's files whose
    statistics lie outside them, where a null-safe match alone reads every file
    (docs/ARCHITECTURE.md, "Applying"). Other types are left out: a condition may only skip
    what cannot match."""
    bounds = []
    for column in columns:
        values = rows.column(column)
        if rows.num_rows == 0 or not (pa.types.is_integer(values.type) or pa.types.is_date(values.type)):
            continue
        held = pc.unique(values.drop_null())
        literals = [_literal(v) for v in held.to_pylist()]
        name = f"{alias}.{quote(column)}"
        if not literals:
            bounds.append(f"{name} IS NULL")
            continue
        if len(literals) <= BOUND_VALUES:
            bound = f"{name} IN ({', '.join(literals)})"
        else:
            low, high = pc.min_max(held).values()
            bound = f"{name} BETWEEN {_literal(low.as_py())} AND {_literal(high.as_py())}"
        bounds.append(f"({bound} OR {name} IS NULL)" if values.null_count else bound)
    return bounds


def _literal(value: object) -> str:
    return str(value) if isinstance(value, int) else f"DATE '{value}'"


@dataclass(frozen=True)
class Folding:
    """An accumulation as one MERGE on the group keys applies it, in the DT's spelling: its
    partials (``source``), the match of a partial (``s``) to a stored group (``t``) on the group
    ``keys``, and per folded column the SQL of its folded value. Prepared before the write, as a
    :class:`PreparedDelta` is (``Writer.accumulate`` writes it)."""

    columns: List[str]
    keys: List[str]
    on: str
    folded: Dict[str, str]
    source: str


def folding(target: Target, accumulation: Accumulation) -> Folding:
    columns = target.spelled(accumulation.columns)
    folded = {
        c: accumulation.folded(named, f"t.{quote(c)}", f"s.{quote(c)}")
        for named, c in zip(accumulation.columns, columns)
        if named in accumulation.kinds
    }
    keys = target.spelled(accumulation.keys)
    source = f"SELECT {target.typed(columns)} FROM ({accumulation.sql}) AS q"
    return Folding(columns, keys, null_safe_match(keys, "t", "s"), folded, source)


def prepare(
    target: Target,
    delta_sql: str,
    columns: List[str],
    key: Optional[Sequence[str]] = None,
    declared_by: Optional[str] = None,
    insert_only: bool = False,
    consolidated: bool = False,
) -> PreparedDelta:
    """Run the delta query once, with what the DT holds of each row, and validate it: one
    engine job. An ``insert_only`` delta matched on whole rows or on a declared key (appends
    through filters and joins) is applied without reading the DT. With a row ``key``, the
    DT's rows are matched on the key instead of the whole row; ``declared_by`` says who
    declared it when the plan does not prove it. ``consolidated``: the delta holds at most one
    row per tuple of the DT's types by construction (a delta query typed by the DT), so the
    engine does not count each tuple's rows to check it."""
    key = list(key) if key is not None else None
    reads_dt = not appends(insert_only, key, declared_by)
    rows = _staged(target, delta_sql, columns, key if reads_dt else None, reads_dt, consolidated)
    if rows.num_rows == 0:
        return PreparedDelta(columns, rows, key)
    _check_consolidated(rows)
    if not reads_dt:
        # The plan proves every weight positive, as the engine's append checks it.
        if pc.min(rows.column(WEIGHT)).as_py() < 1:
            raise DeltaValidationError(ENGINE_CHECKS["not-positive"])
        return PreparedDelta(columns, rows)
    warning = None
    if key is not None:
        broken = _keys_holding_two_rows(rows)
        if not broken:
            return _validated(PreparedDelta(columns, rows, key))
        if declared_by is None:
            raise DeltaValidationError(f"{broken} key(s) of ({', '.join(key)}) would hold two rows")
        warning = (
            f"Dynamic table {target.dt.name}: its key ({', '.join(key)}), declared by "
            f"{declared_by}, is not unique in the data ({broken} key(s) hold two rows), so "
            "this refresh matched whole rows instead. Fix the data or the declaration."
        )
        rows = _staged(target, delta_sql, columns, None, True)
    return _validated(PreparedDelta(columns, rows, warning=warning))


def difference(target: Target, query: str, limit: int, stored: str) -> Optional[PreparedDelta]:
    """What the DT must change to hold ``query``'s rows, staged as a delta matched on whole
    rows (docs/ARCHITECTURE.md, "Rewritten inputs"): the query's rows and the DT's (read from
    ``stored``), counted per distinct row, and each row whose counts differ, with its weight and
    the copies the DT holds. One engine job, which reads the DT once. None where more than
    ``limit`` rows differ (rewriting the DT costs as little then) or a column cannot be grouped
    (a map)."""
    fields = target.schema().fields
    if not all(groupable(f.dataType) for f in fields):
        return None
    columns = [f.name for f in fields]
    names = ", ".join(quote(c) for c in columns)
    new, held = quote(NEW), quote(PRESENT)
    rows = target.engine.arrow(
        f"SELECT {names}, CAST(sum({new}) - sum({held}) AS BIGINT) AS {quote(WEIGHT)}, "
        f"CAST(1 AS BIGINT) AS {COPIES}, CAST(sum({held}) AS BIGINT) AS {OLD} FROM ("
        f"SELECT {target.typed(columns)}, 1 AS {new}, 0 AS {held} FROM ({query}) AS q UNION ALL "
        f"SELECT {names}, 0, 1 FROM {stored}) AS u "
        f"GROUP BY {names} HAVING sum({new}) <> sum({held}) LIMIT {limit + 1}"
    )
    return PreparedDelta(columns, rows) if rows.num_rows <= limit else None


def _staged(
    target: Target,
    delta_sql: str,
    columns: List[str],
    key: Optional[List[str]],
    reads_dt: bool,
    consolidated: bool = False,
) -> pa.Table:
    """The delta's rows, typed as the DT's columns, with ``COPIES`` (rows of the delta with the
    same tuple: 1 when consolidated) and ``OLD``: how many rows of the DT hold the row's tuple
    (no ``key``) or its key (0 when ``reads_dt`` is off); with a key, also ``KEY_*``."""
    typed = target.typed(columns)
    if not reads_dt:
        # Appended, a tuple's rows add up however they are split: no consolidation check.
        return target.engine.arrow(
            f"SELECT {typed}, {quote(WEIGHT)}, CAST(1 AS BIGINT) AS {COPIES}, CAST(0 AS BIGINT) AS {OLD} "
            f"FROM ({delta_sql}) AS q"
        )
    listed = ", ".join(quote(c) for c in columns)
    # Counting each tuple's rows is a window over the whole delta: an engine stage of its own.
    copies = "CAST(1 AS BIGINT)" if consolidated else f"count(*) OVER (PARTITION BY {listed})"
    delta = f"SELECT {typed}, {quote(WEIGHT)}, {copies} AS {COPIES} FROM ({delta_sql}) AS q"
    match = key if key is not None else columns
    log = target.log()
    dt_bytes = log.size_bytes(log.latest_version()) if log is not None else None
    here = dt_bytes is not None and counts_held_rows_here(target.engine.capabilities, dt_bytes)
    if not here and (dt_bytes is None or dt_bytes < BOUNDED_STAGING_BYTES):
        # A small DT: one engine job reading it whole beats two, the second bounded by the delta.
        return target.engine.arrow(_with_old(target, delta, match, columns, key))
    # The delta's rows first; then what the DT holds of them, counted in this process from its
    # files, or by the engine reading the DT's rows within their bounds, which skips the DT's
    # files (and row groups) outside them instead of reading the whole DT.
    rows = target.engine.arrow(delta)
    counted = held_rows.with_old(target, rows, match, OLD, key, PER_KEY) if here else None
    if counted is not None:
        return counted
    with target.engine.temporary_view(rows) as view:
        # An empty delta holds no row of the DT: none is read.
        bounds = key_bounds(rows, match, "b") if rows.num_rows else ["FALSE"]
        return target.engine.arrow(_with_old(target, f"SELECT * FROM {view}", match, columns, key, bounds))


def _with_old(
    target: Target,
    delta: str,
    match: Sequence[str],
    columns: Sequence[str],
    key: Optional[Sequence[str]],
    bounds: Sequence[str] = (),
) -> str:
    """The query of ``delta``'s rows with ``OLD``, the DT's rows holding each row's ``match``
    columns (read within ``bounds``, over the DT as ``b``), and with a key, ``KEY_*``."""
    held = ", ".join(quote(c) for c in match)
    dt_rows = f"{target.dt.relation} AS b" + (f" WHERE {' AND '.join(bounds)}" if bounds else "")
    grouped = ", ".join(f"d.{quote(c)}" for c in [*columns, WEIGHT, COPIES])
    joined = (
        f"SELECT {grouped}, count(t.{PRESENT}) AS {OLD} FROM ({delta}) AS d "
        f"LEFT JOIN (SELECT {held}{', ' if held else ''}1 AS {PRESENT} FROM {dt_rows}) AS t "
        f"ON {null_safe_match(match, 'd', 't')} GROUP BY {grouped}"
    )
    per_key = ""
    if key is not None:
        window = f"PARTITION BY {', '.join(quote(c) for c in key)}" if key else ""
        per_key = (
            f", max({OLD}) OVER ({window}) AS {KEY_OLD}, sum({WEIGHT}) OVER ({window}) AS {KEY_WEIGHT}"
            f", row_number() OVER ({window} ORDER BY {WEIGHT}) AS {KEY_RANK}"
        )
    return f"SELECT *{per_key} FROM ({joined}) AS j"


def _keys_holding_two_rows(with_old: pa.Table) -> int:
    """How many keys hold more than one row in the DT now, or would after the delta."""
    old, after = with_old.column(KEY_OLD), pc.add(with_old.column(KEY_OLD), with_old.column(KEY_WEIGHT))
    broken = pc.and_(pc.equal(with_old.column(KEY_RANK), 1), pc.or_(pc.greater(old, 1), pc.greater(after, 1)))
    return int(pc.sum(broken).as_py() or 0)


def _validated(delta: PreparedDelta) -> PreparedDelta:
    """``delta``, unless it deletes rows (or keyed rows) the DT does not hold."""
    rows = delta.rows
    if delta.key is None:
        remaining = pc.add(rows.column(OLD), rows.column(WEIGHT))
    else:
        remaining = pc.add(rows.column(KEY_OLD), rows.column(KEY_WEIGHT))
    if pc.min(remaining).as_py() < 0:
        raise DeltaValidationError("the delta deletes rows the table does not hold")
    return delta


def _check_consolidated(rows: pa.Table) -> None:
    if pc.any(pc.equal(rows.column(WEIGHT), 0)).as_py():
        raise DeltaValidationError("the delta has rows of weight 0")
    repeated = int(pc.sum(pc.greater(rows.column(COPIES), 1)).as_py() or 0)
    if repeated:
        raise DeltaValidationError(
            f"the delta holds {repeated} row(s) more than once (it was not consolidated)"
        )


def _repeated(rows: pa.Table, copies: pa.ChunkedArray) -> pa.Table:
    """Each row of ``rows`` repeated ``copies`` times (none when ``copies`` <= 0)."""
    counts = np.maximum(copies.to_numpy(), 0)
    if (counts == 1).all():
        return rows
    return rows.take(pa.array(np.repeat(np.arange(len(counts)), counts)))
