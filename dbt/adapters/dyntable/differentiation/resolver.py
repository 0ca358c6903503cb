"""How a derivative reads its sources: the protocol, and a reference resolver by version diff.

The plan names base tables (``schema.table``, lower case); a resolver turns each into SQL relation
text at the interval's start (``before``), at its end (``after``) and as its changes: the table's
columns plus ``_dyn_weight`` (+1/-1 per row instance, possibly unconsolidated). The same plan
works with any resolver, e.g. the file-set resolver of ``dbt.adapters.dyntable.changes``.
"""

from __future__ import annotations

from typing import Dict, Mapping, Optional, Protocol, Sequence, Set, Tuple, runtime_checkable

from dbt.adapters.dyntable.delta_log.model import ValueRange
from dbt.adapters.dyntable.differentiation.pruning import Within, restricted
from dbt.adapters.dyntable.vocabulary import WEIGHT, consolidate, quoted_table, table_name
from dbt.adapters.dyntable.vocabulary import quote as q


@runtime_checkable
class SourceResolver(Protocol):
    def before(self, table: str, bound: Optional[Within] = None) -> str:
        """Relation text for ``table`` at the start of the interval; with ``bound``, only its rows
        within it (``pruning.py``)."""

    def after(self, table: str, bound: Optional[Within] = None) -> str:
        """Relation text for ``table`` at the end of the interval, or its rows within ``bound``."""

    def changes(self, table: str) -> str:
        """Relation text: ``table``'s columns plus ``_dyn_weight`` (+1/-1 per row instance)."""

    def is_unchanged(self, table: str) -> bool:
        """No change in the interval: its delta branches are pruned."""

    def is_insert_only(self, table: str) -> bool:
        """Only inserts in the interval: append-only specialisations apply."""

    def value_range(self, table: str, column: str) -> Optional[ValueRange]:
        """The range of ``column``'s values among ``table``'s changed rows; None where unknown."""

    def size_bytes(self, table: str) -> Optional[int]:
        """The bytes of ``table``'s files at the end of the interval; None where unknown."""


class VersionDiffResolver:
    """Reads Delta tables ``VERSION AS OF`` each end of the interval and computes their changes
    as ``(v1 EXCEPT ALL v0) → +1  UNION ALL  (v0 EXCEPT ALL v1) → -1`` (already consolidated).

    ``versions`` maps each table to ``(v0, v1)``. With ``columns`` for a table, its changes are
    grouped counts instead (each distinct row weighted ``count(v1) - count(v0)``): the same
    multiset, and on Sail 0.7.2 about 15x faster than EXCEPT ALL (0.7 s against 11 s on 2M
    rows). The engine is never consulted: ``is_unchanged`` is ``v0 == v1``, and a table counts as
    insert-only only if listed in ``insert_only``, since knowing it needs the table's log.
    """

    def __init__(
        self,
        versions: Mapping[str, Tuple[int, int]],
        insert_only: Optional[Set[str]] = None,
        columns: Optional[Mapping[str, Sequence[str]]] = None,
    ) -> None:
        self.versions: Dict[str, Tuple[int, int]] = {
            table_name(table): span for table, span in versions.items()
        }
        self.insert_only = {table_name(t) for t in insert_only or ()}
        self.columns = {table_name(t): list(c) for t, c in (columns or {}).items()}

    def _span(self, table: str) -> Tuple[int, int]:
        try:
            return self.versions[table_name(table)]
        except KeyError:
            raise KeyError(f"{table} has no versions in this resolver") from None

    def before(self, table: str, bound: Optional[Within] = None) -> str:
        return restricted(f"{quoted_table(table)} VERSION AS OF {self._span(table)[0]}", bound)

    def after(self, table: str, bound: Optional[Within] = None) -> str:
        return restricted(f"{quoted_table(table)} VERSION AS OF {self._span(table)[1]}", bound)

    def value_range(self, table: str, column: str) -> Optional[ValueRange]:
        return None

    def size_bytes(self, table: str) -> Optional[int]:
        return None

    def changes(self, table: str) -> str:
        before, after = self.before(table), self.after(table)
        columns = self.columns.get(table_name(table))
        if columns:
            listed = ", ".join(q(c) for c in columns)
            both = (
                f"SELECT {listed}, 1 AS {q(WEIGHT)} FROM {after} "
                f"UNION ALL SELECT {listed}, -1 AS {q(WEIGHT)} FROM {before}"
            )
            return f"({consolidate(both, columns)})"
        return (
            f"(SELECT *, CAST(1 AS BIGINT) AS {q(WEIGHT)} FROM "
            f"(SELECT * FROM {after} EXCEPT ALL SELECT * FROM {before}) AS `_dyn_ins` "
            f"UNION ALL SELECT *, CAST(-1 AS BIGINT) AS {q(WEIGHT)} FROM "
            f"(SELECT * FROM {before} EXCEPT ALL SELECT * FROM {after}) AS `_dyn_del`)"
        )

    def is_unchanged(self, table: str) -> bool:
        v0, v1 = self._span(table)
        return v0 == v1

    def is_insert_only(self, table: str) -> bool:
        return self.is_unchanged(table) or table_name(table) in self.insert_only
