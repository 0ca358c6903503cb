"""The engine's writer (``write.py``): a refresh's rows written by SQL statements the engine
runs, and the paths where the engine computes a delta and writes it alone, its rows never
coming to this process (``strategy.InEngine``; docs/ARCHITECTURE.md, "Applying").
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

from dbt.adapters.dyntable.dynamic_table.refresh.apply import (
    COPIES,
    KIND,
    Folding,
    PreparedDelta,
    changes,
    engine_checks,
)
from dbt.adapters.dyntable.dynamic_table.refresh.carried import carrying_condition
from dbt.adapters.dyntable.dynamic_table.refresh.target import Target
from dbt.adapters.dyntable.vocabulary import WEIGHT, failed_check, null_safe_match, quote


class EngineWriter:
    """Writes the DT by SQL. Its commits carry the intent where the engine records a MERGE's
    condition (``Capabilities.merge_condition_recorded``): a MERGE's in a conjunct of its
    condition, an INSERT's in its writer option."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.engine = target.engine
        self.relation = target.dt.relation
        self.carries_intent = target.engine.capabilities.merge_condition_recorded

    def apply(self, delta: PreparedDelta, user_metadata: Optional[str]) -> Tuple[int, int]:
        """``Writer.apply``: an INSERT or a MERGE from a view of the rows this process holds."""
        written = changes(self.target, delta)
        names = ", ".join(quote(c) for c in written.columns)
        if written.deletes.num_rows == 0:
            with self.engine.temporary_view(written.inserts) as view:
                self.engine.append(self.relation, f"SELECT {names} FROM {view}", user_metadata)
            return delta.inserted, delta.deleted
        with self.engine.temporary_view(written.merge_source()) as view:
            self.engine.execute(
                f"MERGE INTO {self.relation} AS t USING {view} AS s ON {written.on}{_carried(user_metadata)} "
                "WHEN MATCHED THEN DELETE "
                f"WHEN NOT MATCHED AND s.{KIND} = 'I' THEN INSERT ({names}) "
                f"VALUES ({', '.join(f's.{quote(c)}' for c in written.columns)})"
            )
        return delta.inserted, delta.deleted

    def accumulate(self, fold: Folding, user_metadata: Optional[str]) -> Tuple[int, int]:
        """``Writer.accumulate``: one MERGE whose source the engine computes; the DT is read
        once, by the MERGE."""
        types = self.target.types()
        updates = ", ".join(
            f"{quote(c)} = CAST({sql} AS {types[c.lower()]})" for c, sql in fold.folded.items()
        )
        names = ", ".join(quote(c) for c in fold.columns)

        def merge() -> None:
            with self._merge_source(fold.source) as partials:
                if partials is not None:
                    self.engine.execute(
                        f"MERGE INTO {self.relation} AS t USING {partials} AS s "
                        f"ON {fold.on}{_carried(user_metadata)} "
                        f"WHEN MATCHED THEN UPDATE SET {updates} "
                        f"WHEN NOT MATCHED THEN INSERT ({names}) "
                        f"VALUES ({', '.join(f's.{quote(c)}' for c in fold.columns)})"
                    )

        return self._counted(merge)

    def append(self, delta_sql: str, columns: List[str], user_metadata: Optional[str]) -> Tuple[int, int]:
        """Append an insert-only delta in the engine: one INSERT ... SELECT, so its rows never
        come to this process (docs/ARCHITECTURE.md, "Applying"). A row of weight n goes in n
        times. Its commit records ``user_metadata`` (a writer option of the engine's append).
        The rows inserted come from the commit's metrics, as :meth:`_counted` reads them."""
        names = ", ".join(quote(c) for c in columns)
        # The plan proves every weight positive; sequence(1, 0) would still yield two rows.
        weight = f"d.{quote(WEIGHT)}"
        copies = f"CASE WHEN {weight} > 0 THEN CAST({weight} AS INT) ELSE {failed_check('not-positive')} END"
        typed = f"SELECT {self.target.typed(columns)}, {quote(WEIGHT)} FROM ({delta_sql}) AS q"
        rows = f"SELECT {names} FROM ({typed}) AS d LATERAL VIEW explode(sequence(1, {copies})) AS {COPIES}"

        def insert() -> None:
            with engine_checks([]):
                self.engine.append(self.relation, rows, user_metadata)

        return self._counted(insert)

    def merge_on_key(
        self, delta_sql: str, columns: List[str], key: Sequence[str], user_metadata: Optional[str]
    ) -> Tuple[int, int]:
        """Apply a delta matched on a key the plan proves in one MERGE, its source computed and
        checked by the engine (docs/ARCHITECTURE.md, "Applying").

        Per key the delta holds at most a delete of the stored row and an insert: both are an
        update, one alone a delete or an insert. A key the delta repeats, a row of weight 0 or
        beyond ±1, an insert under a key the DT holds and a delete of a key it does not hold
        fail the statement (``raise_error``), so nothing is committed, and raise
        :class:`DeltaValidationError`. The rows inserted and deleted come from the commit's
        metrics (an update is one of each). The DT holds at most one row per key because every
        refresh keeps it so: a rebuild writes the query's rows, whose key the plan proves, and
        this MERGE never inserts under a key held."""
        key = list(key)
        weight = quote(WEIGHT)
        rows, least, most = f"count({weight})", f"min({weight})", f"max({weight})"
        kind = (
            f"CASE WHEN min(abs({weight})) = 0 THEN {failed_check('weight-0')} "
            f"WHEN {least} < -1 OR ({rows} = 2 AND {most} < 0) THEN {failed_check('not-held')} "
            f"WHEN {most} > 1 OR {rows} > 2 OR ({rows} = 2 AND {least} > 0) THEN {failed_check('key-twice')} "
            f"WHEN {rows} = 2 THEN 'U' WHEN {most} > 0 THEN 'I' ELSE 'D' END"
        )
        keyed = {k.lower() for k in key}
        # One row per key: the insert's values where the key has one (the larger weight).
        values = [
            quote(c) if c.lower() in keyed else f"max_by({quote(c)}, {weight}) AS {quote(c)}" for c in columns
        ]
        group = f" GROUP BY {', '.join(quote(c) for c in key)}" if key else ""
        source = (
            f"SELECT {', '.join(values)}, {kind} AS {KIND} FROM (SELECT {self.target.typed(columns)}, "
            f"{weight} FROM ({delta_sql}) AS q) AS d{group} HAVING count(*) > 0"
        )

        def merge() -> None:
            with engine_checks(key), self._merge_source(source) as merged:
                if merged is not None:
                    self._merge_keyed(merged, key, columns, user_metadata)

        return self._counted(merge)

    def _merge_keyed(
        self, source: str, key: List[str], columns: List[str], user_metadata: Optional[str]
    ) -> None:
        """The MERGE of :meth:`merge_on_key`, whose checks against the DT's rows are its clauses:
        an insert under a key held, or a delete or update of a key not held, fails it."""
        updated = [c for c in columns if c.lower() not in {k.lower() for k in key}] or columns
        names = ", ".join(quote(c) for c in columns)
        values = [f"s.{quote(c)}" for c in columns]
        types = self.target.types()
        held = failed_check("key-twice", types[updated[0].lower()])
        not_held = failed_check("not-held", types[columns[0].lower()])
        self.engine.execute(
            f"MERGE INTO {self.relation} AS t USING {source} AS s "
            f"ON {null_safe_match(key, 't', 's')}{_carried(user_metadata)} "
            f"WHEN MATCHED AND s.{KIND} = 'D' THEN DELETE "
            f"WHEN MATCHED AND s.{KIND} = 'U' THEN UPDATE SET "
            f"{', '.join(f'{quote(c)} = s.{quote(c)}' for c in updated)} "
            f"WHEN MATCHED THEN UPDATE SET {quote(updated[0])} = {held} "
            f"WHEN NOT MATCHED AND s.{KIND} = 'I' THEN INSERT ({names}) VALUES ({', '.join(values)}) "
            f"WHEN NOT MATCHED THEN INSERT ({names}) "
            f"VALUES ({', '.join([not_held, *values[1:]])})"
        )

    @contextmanager
    def _merge_source(self, source: str) -> Iterator[Optional[str]]:
        """``source`` as a MERGE reads it: inline where the engine computes a MERGE's source once,
        else computed once here (its checks run then) and read from a view of its rows; None
        when it has no rows."""
        if self.engine.capabilities.merge_source_once:
            yield f"({source})"
            return
        rows = self.engine.arrow(source)
        if rows.num_rows == 0:
            yield None
            return
        with self.engine.temporary_view(rows) as view:
            yield view

    def _counted(self, write: Callable[[], None]) -> Tuple[int, int]:
        """Run ``write`` (at most one MERGE or INSERT) and return the rows it inserted and
        deleted, from its commit's metrics, an update being one of each; (0, 0) when the engine
        committed nothing (nothing matched and nothing was inserted). Counting so reads one
        commit, where the log's statistics would replay the DT's files."""
        log = self.target.log()
        assert log is not None, "an incremental refresh applies to an existing DT"
        before = log.latest_version()
        write()
        after = log.latest_version()
        if after == before:
            return 0, 0
        return log.rows_added_and_removed(after) or (0, 0)


def _carried(user_metadata: Optional[str]) -> str:
    """The conjunct of a MERGE's condition carrying ``user_metadata`` (none when None)."""
    return f" AND {carrying_condition(user_metadata)}" if user_metadata is not None else ""
