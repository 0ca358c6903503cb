"""Check a derivative on the engine under test: state(v0) ⊎ Δ == Q(v1) as multisets.

A scenario creates Delta tables with rows at v0, evaluates the query (the engine's own answer,
never the differentiation engine's rendering), commits DML to reach v1, evaluates the query
again, and applies the delta computed by ``differentiate`` to the first answer. Views named in
a scenario are created in the engine too, so the engine's answer reads them as views while the
planner inlines them.
"""

from __future__ import annotations

import decimal
import re
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from dbt.adapters.dyntable.changes import FileSetResolver
from dbt.adapters.dyntable.delta_log import DeltaLog
from dbt.adapters.dyntable.differentiation import (
    DeltaQuery,
    Plan,
    VersionDiffResolver,
    differentiate,
    plan_query,
)
from dbt.adapters.dyntable.differentiation.pruning import Within
from dbt.adapters.dyntable.dynamic_table.config import DynamicTableConfig
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.refresh.apply import folding
from dbt.adapters.dyntable.dynamic_table.refresh.target import Target
from dbt.adapters.dyntable.dynamic_table.refresh.write import writer_for
from dbt.adapters.dyntable.engines.base import Engine
from dbt.adapters.dyntable.vocabulary import table_name

WEIGHT = "_dyn_weight"


def hashable(value: Any) -> Any:
    """Rows as comparable values: floats rounded (sums may associate differently), nested types
    as tuples."""
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, decimal.Decimal):
        return value.normalize()
    if isinstance(value, (list, tuple)):
        return tuple(hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, hashable(v)) for k, v in value.items()))
    if hasattr(value, "asDict"):
        return tuple(hashable(v) for v in value)
    return value


def multiset(rows: Iterable[Sequence[Any]]) -> Counter:
    return Counter(tuple(hashable(v) for v in row) for row in rows)


class RecordingFileSets(FileSetResolver):
    """The production resolver, remembering what it hands out for each source's versions before
    and after the change: a test asks whether, or how often, a delta reads a version without
    knowing how this engine reads it (``VERSION AS OF``, or a view over the version's files)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.handed: Dict[str, Dict[str, Set[str]]] = {}

    def before(self, table: str, bound: Optional[Within] = None) -> str:
        return self._recorded(table, "before", super().before(table, bound))

    def after(self, table: str, bound: Optional[Within] = None) -> str:
        return self._recorded(table, "after", super().after(table, bound))

    def _recorded(self, table: str, side: str, text: str) -> str:
        self.handed.setdefault(table_name(table), {}).setdefault(side, set()).add(text)
        return text


@dataclass
class Outcome:
    sql: str
    delta: DeltaQuery
    before: Counter
    after: Counter
    delta_rows: List[Tuple[Tuple[Any, ...], int]]
    applied: Counter
    #: The stored rows after the delta's accumulation was applied to them (``Writer.accumulate``,
    #: one MERGE), when the delta offers one.
    accumulated: Optional[Counter] = None
    #: With the file-sets resolver: by source, the relations it handed out reading the source
    #: ``before`` and ``after`` the change (``VERSION AS OF`` or a view over that version's files,
    #: as the engine reads it), whether or not the delta used them.
    handed: Mapping[str, Mapping[str, Set[str]]] = field(default_factory=dict)

    def reads_before(self, table: str) -> bool:
        """Whether the delta reads ``table`` as it was before the change (Q|I0), in any form."""
        return any(
            self._occurrences(text) for text in self.handed.get(table_name(table), {}).get("before", ())
        )

    def reads(self, table: str) -> int:
        """How many times the delta reads a version of ``table`` (an unchanged table's two are one)."""
        sides = self.handed.get(table_name(table), {})
        return sum(self._occurrences(text) for text in set().union(*sides.values()))

    def _occurrences(self, text: str) -> int:
        return len(re.findall(re.escape(text) + r"(?!\w)", self.delta.sql))

    def report(self, dml: Sequence[str]) -> str:
        missing = self.after - self.applied
        extra = self.applied - self.after
        return (
            f"query: {self.sql}\nDML: {list(dml)}\nstate(v0): {dict(self.before)}\n"
            f"delta: {self.delta_rows}\nexpected Q(v1): {dict(self.after)}\n"
            f"got state(v0)+delta: {dict(self.applied)}\nmissing: {dict(missing)}\n"
            f"extra: {dict(extra)}"
        )


@dataclass
class Warehouse:
    """One schema of Delta tables on the engine under test, unique per test."""

    engine: Engine
    schema: str = field(default_factory=lambda: f"dd_{uuid.uuid4().hex[:10]}")

    def __post_init__(self) -> None:
        self.engine.execute(f"create schema if not exists {self.schema}")

    def table(self, name: str, columns: str, rows: Sequence[str] = (), properties: str = "") -> str:
        """Create ``schema.name`` with ``columns`` and insert ``rows`` (SQL tuples)."""
        qualified = f"{self.schema}.{name}"
        self.engine.execute(f"create table {qualified} ({columns}) using delta {properties}")
        if rows:
            self.engine.execute(f"insert into {qualified} values {', '.join(rows)}")
        return qualified

    def view(self, name: str, sql: str) -> str:
        qualified = f"{self.schema}.{name}"
        self.engine.execute(f"create or replace view {qualified} as {sql}")
        return qualified

    def version(self, table: str) -> int:
        schema, name = table.split(".")
        location = self.engine.table_location(schema, name)
        assert location is not None, table
        return DeltaLog(location).latest_version()

    def rows(self, sql: str) -> Counter:
        return multiset(self.engine.execute(sql).collect())

    def check(
        self,
        sql: str,
        dml: Sequence[str],
        *,
        views: Optional[Mapping[str, str]] = None,
        unique_keys: Optional[Mapping[str, List[str]]] = None,
        insert_only: Optional[Set[str]] = None,
        resolver: str = "except-all",
        stored: bool = False,
        checked_fold: bool = False,
    ) -> Outcome:
        """Run the scenario; ``insert_only`` names tables the resolver may treat as append-only
        (only true when ``dml`` only inserts into them); ``resolver`` picks how changes are read:
        the version-diff resolver by ``except-all`` or ``grouped-counts``, or the production
        ``file-sets`` resolver. With ``stored``, the query's result before the DML is kept in a
        table handed to ``differentiate`` as the DT's stored rows, and ``checked_fold`` lets
        rules fold deletes into them under a check (a failed one raises the engine's error)."""
        plan = plan_query(sql, views=views or {}, unique_keys=unique_keys or {})
        start = {t: self.version(t) for t in plan.sources}
        before = self.rows(sql)
        stored_relation = None
        if stored:
            stored_relation = f"{self.schema}.stored_{uuid.uuid4().hex[:8]}"
            self.engine.execute(f"create table {stored_relation} using delta as {sql}")
        for statement in dml:
            self.engine.execute(statement)
        end = {t: self.version(t) for t in plan.sources}
        after = self.rows(sql)
        try:
            delta, collected, accumulated, handed = self._delta(
                plan, start, end, resolver, insert_only, stored_relation, checked_fold
            )
        finally:
            if stored_relation:
                self.engine.execute(f"drop table {stored_relation}")
        assert delta.columns == plan.columns
        delta_rows = []
        for row in collected:
            values = tuple(hashable(v) for v in row)
            delta_rows.append((values[:-1], row[-1]))
        applied = Counter(before)
        for values, weight in delta_rows:
            applied[values] += weight
        outcome = Outcome(sql, delta, before, after, delta_rows, +applied, accumulated, handed)
        negative = {k: v for k, v in applied.items() if v < 0}
        assert not negative, f"delta deletes rows that are not there: {negative}\n" + outcome.report(dml)
        tuples = [values for values, _ in delta_rows]
        assert len(tuples) == len(set(tuples)), "delta is not consolidated\n" + outcome.report(dml)
        assert all(w != 0 for _, w in delta_rows), "zero weight in delta\n" + outcome.report(dml)
        if delta.insert_only:
            assert all(w > 0 for _, w in delta_rows), outcome.report(dml)
        assert outcome.applied == after, outcome.report(dml)
        if accumulated is not None:
            assert accumulated == after, (
                f"accumulated into the stored rows: {dict(accumulated)}\n" + outcome.report(dml)
            )
        return outcome

    def _delta(
        self,
        plan: Plan,
        start: Mapping[str, int],
        end: Mapping[str, int],
        resolver: str,
        insert_only: Optional[Set[str]],
        stored_relation: Optional[str],
        checked_fold: bool,
    ) -> Tuple[DeltaQuery, List[Any], Optional[Counter], Mapping[str, Mapping[str, Set[str]]]]:
        """The derivative over [start, end] read through ``resolver``, its rows, the stored
        rows after its accumulation (when it has one) was applied to them, and (file-sets) the
        relations handed out reading each source before and after the change."""
        if resolver == "file-sets":
            logs = {}
            for table in plan.sources:
                schema, name = table.split(".")
                logs[table] = (DeltaLog(self.engine.table_location(schema, name)), start[table], end[table])
            with RecordingFileSets(
                self.engine.spark, logs, capabilities=self.engine.capabilities
            ) as file_sets:
                delta = differentiate(plan, file_sets, stored_relation, checked_fold)
                return (
                    delta,
                    self.engine.execute(delta.sql).collect(),
                    self._accumulated(delta, stored_relation),
                    file_sets.handed,
                )
        columns = None
        if resolver == "grouped-counts":
            columns = {t: self.engine.spark.table(t).columns for t in plan.sources}
        version_diff = VersionDiffResolver(
            {t: (start[t], end[t]) for t in plan.sources}, insert_only=insert_only, columns=columns
        )
        delta = differentiate(plan, version_diff, stored_relation, checked_fold)
        return delta, self.engine.execute(delta.sql).collect(), self._accumulated(delta, stored_relation), {}

    def _accumulated(self, delta: DeltaQuery, stored_relation: Optional[str]) -> Optional[Counter]:
        """The stored rows after ``delta``'s accumulation is applied to them as a refresh applies
        it, or None when the delta has none. Run after the delta's own rows were read."""
        if delta.accumulation is None or stored_relation is None:
            return None
        schema, name = stored_relation.split(".")
        stored = DynamicTable(
            schema, name, "select 1", DynamicTableConfig.from_model(name, {"target_lag": "1 minute"})
        )
        target = Target(self.engine, stored)
        writer_for(target).accumulate(folding(target, delta.accumulation), None)
        return self.rows(f"select * from {stored_relation}")
