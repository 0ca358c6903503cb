"""GROUP BY: recompute the groups ΔQ touches (docs/ARCHITECTURE.md, "Deriving")::

    Δγ_k(Q) = -γ_k(Q|I0 ⋉_k ΔQ) + γ_k(Q|I1 ⋉_k ΔQ)

The semi-join on the group keys is NULL-safe (``<=>``), as GROUP BY puts NULL keys in one group.
The two sides are consolidated here, so a touched group whose aggregates did not change
contributes nothing and an updated group becomes one -1 and one +1 row (the materialization turns
that pair into an update by ``plan.row_key``, the group keys). Any order-independent aggregate
works (count, count(distinct), sum, avg, min, max, bool_and/or, stddev, ...), since the group is
recomputed from its rows.

A global aggregate (no GROUP BY) has exactly one row at every version, even over empty input
(count 0, sum NULL), so its derivative is ``-γ(Q|I0) + γ(Q|I1)`` whenever Q changed.

When the DT stores this node's rows (``Differentiator.stored_rows``: they are γk(Q|I0)), the old
side is read from the DT instead of recomputed::

    Δγ_k(Q) = -(DT ⋉_k ΔQ) + γ_k(Q|I1 ⋉_k ΔQ)        Δγ(Q) = -DT + γ(Q|I1)

matching the DT's group-key columns NULL-safely against the keys ΔQ touches. The deleted rows are
the DT's own, so they remove exactly what is stored, even a float sum that earlier folds rounded
differently from a recomputation (which then simply does not cancel against the new row).

Cost beyond ΔQ: Q read twice (at I0 and I1), restricted to the touched groups; with the DT's rows,
Q read once (at I1) and the DT's rows of the touched groups. Where a group key bounds the rows the
change can touch, Q is read with that bound on its source's scan (``pruning.py``), so the engine
skips the files outside it. Cheaper than recomputation when few
groups change, dearer when most do (a cost-based choice of FULL
refresh is the materialization's). Where Q is an inner join whose larger input did not change,
the touched groups are read off the other input's change instead of ΔQ (``changed_input.py``),
so the larger input is read once, not twice.

Insert-only changes under a stored GROUP BY of count, sum, min and max (the common streaming case)
are folded into the DT's stored rows instead::

    Δγk(Q) = -(DT ⋉k ΔQ) + (DT ⟕k γk'(ΔQ))    with count' = SUM(w), sum' = SUM(x·w), min/max as is

which reads ΔQ and the touched rows of the DT, never Q. It is exact for inserts only: a deletion
could empty a group or take away its minimum, which the stored row cannot tell. Deletes and the
other aggregates (count(distinct), avg, bool_and/or, ...) read Q|I1 as above.

Where AUTO may recompute instead (``Differentiator.checked_fold``), deletes and updates fold too,
checked group by group, so a DT over a DT whose groups change in place reads ΔQ and the DT, never Q:
count(*) and count(x) add the signed weights; an exact sum (an integer or decimal) adds ``x·w`` and
stays right while the group keeps a non-null summand (one is inserted, or none deleted); a max
stays the stored one when the deleted values are below it, or becomes the inserted max when that
is at least the deleted one (min alike). A group whose count(*) falls to 0 goes away; without a
count(*), a group that gained no row may have emptied. Where a group meets none of these, the
stored row cannot tell its new value: the query fails a check (``UNFOLDABLE``), nothing is written,
and AUTO rescans the touched groups or recomputes the DT (docs/ARCHITECTURE.md, "Checked folds").

Such a fold is also offered as an :class:`Accumulation`: the partials γk'(ΔQ) alone, one row per
touched group, which the DT applies by one MERGE on the group keys that folds each partial into
the stored value (``SET n = n + s.n``) and inserts new groups. Its source never reads the DT, so
the engine reads the DT once, in the MERGE, instead of twice (docs/ARCHITECTURE.md, "Applying").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional, Sequence, Tuple

from sqlglot import exp

from dbt.adapters.dyntable.differentiation.changed_input import changed_input_keys
from dbt.adapters.dyntable.differentiation.plan import Aggregate
from dbt.adapters.dyntable.differentiation.render import aggregate_select
from dbt.adapters.dyntable.differentiation.sqltext import cols, expr, signed, union_all
from dbt.adapters.dyntable.vocabulary import WEIGHT, consolidate, failed_check, null_safe_match
from dbt.adapters.dyntable.vocabulary import quote as q

if TYPE_CHECKING:
    from dbt.adapters.dyntable.differentiation.derivative import Differentiator

NODE = Aggregate
RULE = "Δγk(Q) = -γk(Q|I0 ⋉k ΔQ) + γk(Q|I1 ⋉k ΔQ)"
#: When the DT stores this node's rows: its touched groups are the old side.
STORED_RULE = "Δγk(Q) = -(DT ⋉k ΔQ) + γk(Q|I1 ⋉k ΔQ)"
#: When ΔQ only inserts and every aggregate folds (count, sum, min, max): Q is never read.
FOLD_RULE = "Δγk(Q) = -(DT ⋉k ΔQ) + (DT ⋉k ΔQ) ⊕ γk(ΔQ) (ΔQ inserts only; count, sum, min, max fold)"
#: When ΔQ also deletes and AUTO may recompute: the fold checked group by group.
CHECKED_FOLD_RULE = (
    "Δγk(Q) = -(DT ⋉k ΔQ) + (DT ⋉k ΔQ) ⊕ γk±(ΔQ) (count, exact sum, min, max fold; a group the "
    "stored row cannot tell fails the check, and AUTO rescans or recomputes)"
)
#: When the input is an inner join of whose inputs only the smaller changed (``changed_input.py``).
NARROWED_RULE = "Δγk(Q) = -γk(Q|I0 ⋉kR ΔR) + γk(Q|I1 ⋉kR ΔR) (Q = L ⋈ R, L unchanged and larger)"
STORED_NARROWED_RULE = "Δγk(Q) = -(DT ⋉kR ΔR) + γk(Q|I1 ⋉kR ΔR) (Q = L ⋈ R, L unchanged and larger)"
#: The check a checked fold fails (``vocabulary.failed_check``) for a group it cannot fold.
UNFOLDABLE = "group-unfoldable"


def touched_keys(d: "Differentiator", keys: Sequence[exp.Expression], delta: str) -> str:
    """The distinct values of the ``keys`` expressions in ``delta``, as ``_dyn_k0, _dyn_k1...``;
    computed once, read for both sides of a derivative."""
    distinct_keys = ", ".join(f"{expr(e)} AS {q(f'_dyn_k{i}')}" for i, e in enumerate(keys))
    return d.share(f"SELECT DISTINCT {distinct_keys} FROM ({delta}) AS `_dyn_d`")


def touched_rows(relation: str, columns: Sequence[str], keys: Sequence[exp.Expression], touched: str) -> str:
    """Rows of ``relation`` whose ``keys`` values are among ``touched`` (NULL-safe)."""
    match = " AND ".join(f"{expr(e)} <=> `_dyn_k`.{q(f'_dyn_k{i}')}" for i, e in enumerate(keys))
    return (
        f"SELECT {cols(columns)} FROM ({relation}) AS `_dyn_q` LEFT SEMI JOIN ({touched}) AS `_dyn_k` "
        f"ON {match}"
    )


def derive(node: Aggregate, d: "Differentiator") -> Optional[str]:
    delta = d.derive(node.child)
    if delta is None:
        return None
    stored = d.stored_rows(node)
    if stored is not None:
        if d.positive(node.child):
            folded, rule = fold_into_stored(node, delta, stored), FOLD_RULE
        elif d.checked_fold and node.keys:
            folded, rule = fold_checked(node, delta, stored), CHECKED_FOLD_RULE
        else:
            folded = None
        if folded is not None:
            d.note(node, rule)
            return folded
    keys = [e for _, e in node.keys]
    stored_keys: List[exp.Expression] = [exp.column(n, quoted=True) for n, _ in node.keys]
    narrowed = changed_input_keys(d, node.child, keys) if keys else None
    if narrowed is not None:
        d.note(node, NARROWED_RULE if stored is None else STORED_NARROWED_RULE)
        touched: Optional[str] = narrowed.touched
        keys, stored_keys = narrowed.keys(keys), narrowed.keys(stored_keys)
    else:
        touched = touched_keys(d, keys, delta) if keys else None

    def restricted(relation: str, columns: Sequence[str], on: Sequence[exp.Expression]) -> str:
        return relation if touched is None else touched_rows(relation, columns, on, touched)

    if stored is not None:
        if narrowed is None:
            d.note(node, STORED_RULE)
        old = restricted(stored, node.columns, stored_keys)
    else:
        old = aggregate_select(node, restricted(d.before(node.child, keys), node.child.columns, keys))
    new = aggregate_select(node, restricted(d.after(node.child, keys), node.child.columns, keys))
    combined = union_all([signed(old, node.columns, -1), signed(new, node.columns, 1)])
    assert combined is not None
    return consolidate(combined, node.columns)


#: Per aggregate kind: its partial over a positive delta, and how it combines with the stored value.
_PARTIAL = {
    "count_star": lambda x: f"SUM({q(WEIGHT)})",
    "count": lambda x: f"SUM(CASE WHEN {x} IS NOT NULL THEN {q(WEIGHT)} ELSE 0 END)",
    "sum": lambda x: f"SUM({x} * {q(WEIGHT)})",
    "min": lambda x: f"MIN({x})",
    "max": lambda x: f"MAX({x})",
}
_COMBINE = {
    "count_star": lambda old, new: f"COALESCE({old}, 0) + {new}",
    "count": lambda old, new: f"COALESCE({old}, 0) + {new}",
    "sum": lambda old, new: (
        f"CASE WHEN {old} IS NULL THEN {new} WHEN {new} IS NULL THEN {old} ELSE {old} + {new} END"
    ),
    "min": lambda old, new: (
        f"CASE WHEN {old} IS NULL THEN {new} WHEN {new} IS NULL THEN {old} ELSE LEAST({old}, {new}) END"
    ),
    "max": lambda old, new: (
        f"CASE WHEN {old} IS NULL THEN {new} WHEN {new} IS NULL THEN {old} ELSE GREATEST({old}, {new}) END"
    ),
}


def foldable(aggregate: exp.Expression) -> Optional[Tuple[str, Optional[exp.Expression]]]:
    """The kind and argument of an aggregate an insert can be folded into, else None.

    >>> import sqlglot
    >>> foldable(sqlglot.parse_one("count(*)"))
    ('count_star', None)
    >>> foldable(sqlglot.parse_one("sum(a * 2)"))[0], foldable(sqlglot.parse_one("count(distinct a)"))
    ('sum', None)
    """
    if isinstance(aggregate, exp.Count):
        if isinstance(aggregate.this, exp.Star):
            return "count_star", None
        if aggregate.this is None or isinstance(aggregate.this, exp.Distinct) or aggregate.expressions:
            return None
        return "count", aggregate.this
    for kind, node_type in (("sum", exp.Sum), ("min", exp.Min), ("max", exp.Max)):
        if (
            isinstance(aggregate, node_type)
            and not aggregate.expressions
            and not isinstance(aggregate.this, exp.Distinct)
        ):
            return kind, aggregate.this
    return None


def _foldable_kinds(node: Aggregate) -> Optional[List[Tuple[str, Optional[exp.Expression]]]]:
    """The kind and argument of each of ``node``'s aggregates, or None when one cannot fold."""
    found = [foldable(e) for _, e in node.aggregates]
    kinds = [k for k in found if k is not None]
    return kinds if len(kinds) == len(found) else None


def _partials(
    node: Aggregate,
    delta: str,
    kinds: Sequence[Tuple[str, Optional[exp.Expression]]],
    names: Optional[Mapping[str, str]] = None,
) -> str:
    """γk'(ΔQ): per touched group, its keys and each aggregate's partial over the positive
    ``delta``, under ``node``'s column names or the ``names`` given for them."""
    names = names or {}
    partials = ", ".join(
        [f"{expr(e)} AS {q(names.get(n, n))}" for n, e in node.keys]
        + [
            f"{_PARTIAL[kind](expr(arg) if arg is not None else '')} AS {q(names.get(n, n))}"
            for (n, _), (kind, arg) in zip(node.aggregates, kinds)
        ]
    )
    group = f" GROUP BY {', '.join(expr(e) for _, e in node.keys)}" if node.keys else ""
    return f"SELECT {partials} FROM ({delta}) AS `_dyn_q`{group}"


def fold_into_stored(node: Aggregate, delta: str, stored: str) -> Optional[str]:
    """``-(stored rows of the touched groups) + (those rows with the delta folded in)``, or None
    when some aggregate cannot be folded. ``delta`` must be positive."""
    kinds = _foldable_kinds(node)
    if kinds is None:
        return None
    folded = [
        _COMBINE[kind](f"`_dyn_o`.{q(n)}", f"`_dyn_g`.{q(n)}")
        for (n, _), (kind, _) in zip(node.aggregates, kinds)
    ]
    return _folded_groups(node, _partials(node, delta, kinds), stored, folded)


def fold_checked(node: Aggregate, delta: str, stored: str) -> Optional[str]:
    """:func:`fold_into_stored` for a ``delta`` that may delete: each group's new row from its
    stored row and the delta's signed partials, where they tell it; a group they do not tell
    fails the query (``UNFOLDABLE``). None when some aggregate cannot be folded."""
    kinds = _foldable_kinds(node)
    if kinds is None:
        return None
    partials = [f"MAX(CASE WHEN {q(WEIGHT)} > 0 THEN 1 ELSE 0 END) AS `_dyn_ins`"]
    folded, checks, counted = [], [], None
    for i, ((name, _), (kind, arg)) in enumerate(zip(node.aggregates, kinds)):
        old = f"`_dyn_o`.{q(name)}"
        partials += _signed_partials(kind, expr(arg) if arg is not None else "", i)
        value, told = _signed_fold(kind, old, i)
        folded.append(value)
        checks.append(f"({told})")
        if kind == "count_star" and counted is None:
            counted = value
    keys = [f"{expr(e)} AS {q(n)}" for n, e in node.keys]
    grouped = (
        # Consolidated first: a row the delta inserts and deletes again is not a row the group gained.
        f"SELECT {', '.join(keys + partials)} FROM ({consolidate(delta, node.child.columns)}) AS `_dyn_q` "
        f"GROUP BY {', '.join(expr(e) for _, e in node.keys)}"
    )
    told_all = " AND ".join(checks)
    if counted is None:
        # Without a count(*), only a row the group gained shows that it is not empty.
        alive = "`_dyn_g`.`_dyn_ins` = 1"
        safe = f"{alive} AND {told_all}"
    else:
        alive = f"{counted} > 0"
        safe = f"CASE WHEN {counted} = 0 THEN TRUE WHEN {counted} < 0 THEN FALSE ELSE {told_all} END"
    return _folded_groups(node, grouped, stored, folded, alive, safe)


def _signed_partials(kind: str, x: str, i: int) -> List[str]:
    """The select list of the ``i``-th aggregate's partials over a signed delta, of kind ``kind``
    over ``x``: ``_dyn_p`` its signed partial (min, max: the least, greatest inserted value),
    ``_dyn_r`` the least (greatest) deleted value, or whether a non-null summand was deleted (2
    where the sum is a double), ``_dyn_i`` whether one was inserted."""
    weight = q(WEIGHT)
    if kind == "count_star":
        return [f"SUM({weight}) AS `_dyn_p{i}`"]
    if kind == "count":
        return [f"SUM(CASE WHEN {x} IS NOT NULL THEN {weight} ELSE 0 END) AS `_dyn_p{i}`"]
    if kind == "sum":
        return [
            f"SUM({x} * {weight}) AS `_dyn_p{i}`",
            # Not typeof() alone: JVM Spark propagates that constant into a plan it then cannot
            # resolve (FoldablePropagation).
            f"MAX(CASE WHEN {weight} < 0 AND {x} IS NOT NULL THEN 1 ELSE 0 END) "
            f"* CASE WHEN typeof(SUM({x})) = 'double' THEN 2 ELSE 1 END AS `_dyn_r{i}`",
            f"MAX(CASE WHEN {weight} > 0 AND {x} IS NOT NULL THEN 1 ELSE 0 END) AS `_dyn_i{i}`",
        ]
    extreme = kind.upper()
    return [
        f"{extreme}(CASE WHEN {weight} > 0 THEN {x} END) AS `_dyn_p{i}`",
        f"{extreme}(CASE WHEN {weight} < 0 THEN {x} END) AS `_dyn_r{i}`",
    ]


def _signed_fold(kind: str, old: str, i: int) -> Tuple[str, str]:
    """The ``i``-th aggregate's new value from its stored value ``old`` and its signed partials,
    and the condition under which they tell it (NULL counts as not)."""
    part, removed, inserted = (f"`_dyn_g`.`_dyn_{c}{i}`" for c in "pri")
    if kind in ("count_star", "count"):
        return f"COALESCE({old}, 0) + {part}", "TRUE"
    if kind == "sum":
        # A double's sum drifts under deletes (1e20 + 1 - 1e20): only its inserts fold.
        return (
            f"CASE WHEN {inserted} = 1 THEN COALESCE({old}, 0) + {part} ELSE {old} END",
            f"{removed} = 0 OR ({inserted} = 1 AND {removed} = 1)",
        )
    below, above = ("<", ">=") if kind == "max" else (">", "<=")
    told = f"{removed} IS NULL OR {removed} {below} {old} OR {part} {above} {removed}"
    return _COMBINE[kind](old, part), told


def _folded_groups(
    node: Aggregate,
    grouped: str,
    stored: str,
    folded: Sequence[str],
    alive: str = "TRUE",
    safe: Optional[str] = None,
) -> str:
    """``-(stored rows of the groups in grouped) + (the ``folded`` rows of those ``alive``)``;
    ``folded`` reads ``grouped`` as `_dyn_g` and the stored row as `_dyn_o`. A group not
    ``safe`` fails the query (``UNFOLDABLE``)."""
    keys = [n for n, _ in node.keys]
    values = [n for n, _ in node.aggregates]
    # One join of the touched groups with their stored rows gives both sides of each group, so
    # the delta and the DT are each read once (an engine plans every read anew: Sail 0.7 reloads
    # a Delta table's log for each).
    both = ", ".join(
        [f"`_dyn_g`.{q(k)} AS {q(k)}" for k in keys]
        + [f"`_dyn_o`.{q(n)} AS {q(f'_dyn_old{i}')}" for i, n in enumerate(values)]
        + [f"{f} AS {q(f'_dyn_new{i}')}" for i, f in enumerate(folded)]
        + ["`_dyn_o`.`_dyn_held` IS NOT NULL AS `_dyn_held`", f"{alive} AS `_dyn_alive`"]
        + [f"{safe} AS `_dyn_safe`" if safe else "TRUE AS `_dyn_safe`"]
    )
    joined = (
        f"SELECT {both} FROM ({grouped}) AS `_dyn_g` LEFT JOIN (SELECT *, 1 AS `_dyn_held` FROM "
        f"({stored}) AS `_dyn_s`) AS `_dyn_o` ON {null_safe_match(keys, '`_dyn_o`', '`_dyn_g`')}"
    )
    sides = ", ".join(
        [f"{q(k)} AS {q(k)}" for k in keys]
        + [
            f"CASE WHEN `_dyn_side` = 1 THEN {q(f'_dyn_new{i}')} ELSE {q(f'_dyn_old{i}')} END AS {q(n)}"
            for i, n in enumerate(values)
        ]
        + [f"CAST(`_dyn_side` AS BIGINT) AS {q(WEIGHT)}"]
    )
    # The check is in the generator's input, which every group's row evaluates.
    inserted = f"CASE WHEN `_dyn_safe` THEN 1 ELSE {failed_check(UNFOLDABLE, 'INT')} END" if safe else "1"
    exploded = (
        f"SELECT * FROM ({joined}) AS `_dyn_j` LATERAL VIEW explode(array({inserted}, -1)) AS `_dyn_side`"
    )
    terms = (
        f"SELECT {sides} FROM ({exploded}) AS `_dyn_e` "
        "WHERE (`_dyn_side` = 1 AND `_dyn_alive`) OR (`_dyn_side` = -1 AND `_dyn_held`)"
    )
    return consolidate(terms, node.columns)


@dataclass(frozen=True)
class Accumulation:
    """An insert-only ΔQ of a stored GROUP BY of count, sum, min and max, as partials to fold into
    the DT: ``sql`` returns one row per touched group, its ``keys`` and each of the other
    ``columns``' partial over the inserted rows, under the DT's column names. A MERGE on the keys
    sets each stored value to :meth:`folded` and inserts the groups the DT does not hold."""

    sql: str
    keys: List[str]
    columns: List[str]
    kinds: Mapping[str, str]  # per aggregate column: its kind in ``_COMBINE``

    def folded(self, column: str, stored: str, partial: str) -> str:
        """The SQL of ``column``'s stored value with the partial folded in."""
        return _COMBINE[self.kinds[column]](stored, partial)


def accumulation(node: Aggregate, d: "Differentiator", names: Mapping[str, str]) -> Optional[Accumulation]:
    """``node``'s delta as an :class:`Accumulation`, when the DT stores its rows (under ``names``),
    its input only gained rows, it groups by at least one key and every aggregate folds; else
    None. Its SQL reads the delta of ``node``'s input, never the DT."""
    if not node.keys or d.stored_rows(node) is None or not d.positive(node.child):
        return None
    kinds = _foldable_kinds(node)
    delta = d.derive(node.child)
    if kinds is None or delta is None:
        return None
    by_kind: Dict[str, str] = {names[n]: kind for (n, _), (kind, _) in zip(node.aggregates, kinds)}
    return Accumulation(
        d.with_ctes(_partials(node, delta, kinds, names)),
        [names[n] for n, _ in node.keys],
        [names[n] for n in node.columns],
        by_kind,
    )
