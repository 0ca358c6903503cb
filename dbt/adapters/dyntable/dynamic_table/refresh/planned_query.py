"""Stage 2, plan: the DT's query as a differentiation plan, and the row key its rows are matched
on (docs/ARCHITECTURE.md, "Planning and row keys"). Pure: sqlglot only, no engine.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Hashable, List, Mapping, Optional, Sequence, Union

from dbt.adapters.dyntable.differentiation import NotIncrementalizable, Plan, plan_query
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable


@dataclass(frozen=True)
class OutputKey:
    """The columns a refresh matches the DT's rows on (None: whole rows), and, when the key is
    declared rather than proven by the plan, who declared it (the refresh checks it first)."""

    columns: Optional[List[str]]
    declared_by: Optional[str] = None

    def describe(self) -> str:
        if self.columns is None:
            return "(none: rows are matched whole, as a multiset)"
        listed = ", ".join(self.columns) or "(none: one row)"
        return f"{listed} ({'declared by ' + self.declared_by if self.declared_by else 'proven by the plan'})"


@dataclass(frozen=True)
class PlannedQuery:
    """A query the refresh can differentiate: its plan and the key its rows are matched on."""

    plan: Plan
    key: OutputKey


@dataclass(frozen=True)
class NotPlanned:
    """Why the DT is recomputed instead: ``reason`` as refresh history records it, ``cause`` the
    construct that cannot be differentiated (None under ``refresh_mode: full``)."""

    reason: str
    cause: Optional[str] = None


PlannedOrNot = Union[PlannedQuery, NotPlanned]


#: Plans kept per process (a runner plans each DT once, not at every tick), least recently used
#: dropped first.
PLAN_CACHE_SIZE = 512
_plans: "OrderedDict[Hashable, PlannedOrNot]" = OrderedDict()
_plans_lock = threading.Lock()


def plan(
    dt: DynamicTable, sql: str, views: Mapping[str, str], columns: Mapping[str, Sequence[str]]
) -> PlannedOrNot:
    """Plan ``sql`` (the definition the refresh maintains) with its ``views`` inlined. The planner
    gets each source's ``columns`` (for ``*`` and unqualified columns, from the Delta logs), the
    keys the project declares and the model's deterministic UDFs. Plans are pure, so one is reused
    while all of these are unchanged."""
    key = (
        dt.name,
        sql,
        dt.config,
        tuple(sorted((name, tuple(map(tuple, keys))) for name, keys in dt.declared_keys.items())),
        tuple(sorted(views.items())),
        tuple(sorted((name, tuple(names)) for name, names in columns.items())),
    )
    with _plans_lock:
        cached = _plans.get(key)
        if cached is not None:
            _plans.move_to_end(key)
            return cached
    planned = _plan(dt, sql, views, columns)
    with _plans_lock:
        _plans[key] = planned
        while len(_plans) > PLAN_CACHE_SIZE:
            _plans.popitem(last=False)
    return planned


def _plan(
    dt: DynamicTable, sql: str, views: Mapping[str, str], columns: Mapping[str, Sequence[str]]
) -> PlannedOrNot:
    if dt.config.refresh_mode == "full":
        return NotPlanned("refresh_mode is full")
    try:
        planned = plan_query(
            sql,
            views=views,
            default_schema=dt.schema,
            unique_keys=dt.declared_keys,
            deterministic_functions=frozenset(dt.config.deterministic_functions),
            schema=columns,
        )
    except NotIncrementalizable as exc:
        return NotPlanned(f"not incrementalizable: {exc}", str(exc))
    return PlannedQuery(planned, output_key(planned, dt))


def output_key(plan: Plan, dt: DynamicTable) -> OutputKey:
    """The row key of the DT: the plan's proven key, else the model's ``unique_key`` config, else
    a unique test or constraint on the model, else a key the plan derives from its sources'
    declared keys."""
    if plan.row_key is not None and not plan.row_key_is_declared:
        return OutputKey(plan.row_key)
    by_name = {c.lower(): c for c in plan.columns}
    own = [("the unique_key config", list(dt.config.unique_key))] if dt.config.unique_key else []
    own += [
        (f"a unique test or constraint on {', '.join(key)}", key) for key in dt.declared_keys.get(dt.name, [])
    ]
    for origin, key in own:
        if all(c.lower() in by_name for c in key):
            return OutputKey([by_name[c.lower()] for c in key], origin)
    if plan.row_key is not None:
        return OutputKey(plan.row_key, "unique tests or constraints on its sources")
    return OutputKey(None)
