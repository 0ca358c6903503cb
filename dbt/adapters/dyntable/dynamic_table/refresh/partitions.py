"""Stage 1b, measure: how many partitions a window's rows fall into (docs/ARCHITECTURE.md,
"Deciding").

An incremental refresh recomputes a window over the partitions its change touches only, a
recompute over all of them. Whether that is cheaper depends on how many partitions a change
touches; the logs do not say. A change of n rows of the window's input touches at most n
partitions, so counting the partitions bounds the share: where the input changes by at most one
row per changed source row and the DT holds the partition columns, AUTO counts the distinct
partitions in the DT (a read of those columns) before it weighs the two: from the DT's files in
this process where the engine would spend a job of its own on it (``strategy.counts_held_rows_here``:
on JVM Spark the count's job was the runner's first refresh's longest step, 10 s of 15 in a fresh
JVM), else by the engine.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import pyarrow as pa
from pyspark.sql.types import StructType
from sqlglot import exp

from dbt.adapters.dyntable.data_files import NotReadableInProcess, arrow_schema, live_rows
from dbt.adapters.dyntable.delta_log import DeltaLog
from dbt.adapters.dyntable.differentiation.plan import Filter, Node, Plan, Project, Scan, Window
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.refresh.facts import Observation
from dbt.adapters.dyntable.dynamic_table.refresh.planned_query import PlannedOrNot, PlannedQuery
from dbt.adapters.dyntable.dynamic_table.refresh.strategy import counts_held_rows_here
from dbt.adapters.dyntable.engines.base import Capabilities, Engine
from dbt.adapters.dyntable.vocabulary import quote


def counted_window(plan: Plan) -> Optional[Tuple[Window, List[str]]]:
    """The window whose partitions can be counted in the DT, and the DT's columns holding its
    PARTITION BY: reached from the root through projections and filters that pass each
    partition column up unchanged, over an input of projections and filters over one scan (a
    changed source row changes at most one row of it). None for a first-row filter's window,
    whose DT holds one row per partition already (``estimate``), or where the plan has another
    shape."""
    node: Node = plan.root
    # {column of ``node``: the DT's column holding it}
    held: Dict[str, str] = dict(zip(plan.root.columns, plan.columns))
    while isinstance(node, (Project, Filter)):
        if isinstance(node, Filter) and node.first_row_window() is not None:
            return None
        if isinstance(node, Project):
            held = _passed_down(node, held)
        node = node.child
    if not isinstance(node, Window) or not _row_wise(node.child):
        return None
    partition = node.partition_by
    plain = all(isinstance(e, exp.Column) and not e.table and e.name in held for e in partition)
    if not partition or not plain:
        return None
    return node, [held[e.name] for e in partition]


def measured(
    engine: Engine, dt: DynamicTable, observed: Observation, plan: Callable[[], PlannedOrNot]
) -> Observation:
    """``observed`` with the count of the :func:`counted_window`'s partitions in the DT, where
    AUTO weighs a change to that window's input; else as it was."""
    if dt.config.refresh_mode != "auto" or observed.dt_changed or observed.dt_log is None:
        return observed
    changed = {s.name for s in observed.sources if not s.reads_no_change}
    if not changed or any(s.lost or s.start is None for s in observed.sources):
        return observed  # nothing to weigh, or the DT rebuilds anyway
    planned = plan()
    counted = counted_window(planned.plan) if isinstance(planned, PlannedQuery) else None
    if counted is None or not changed & counted[0].sources():
        return observed
    partitions = counted_here(engine.capabilities, observed.dt_log, observed.dt_size_bytes, counted[1])
    if partitions is None:
        listed = ", ".join(quote(column) for column in counted[1])
        distinct = f"SELECT DISTINCT {listed} FROM {dt.relation}"
        rows = engine.arrow(f"SELECT count(*) AS `partitions` FROM ({distinct}) AS `_dyn_p`")
        partitions = int(rows.column(0)[0].as_py())
    return replace(observed, window_partitions=partitions)


def counted_here(
    capabilities: Capabilities, log: DeltaLog, size_bytes: int, columns: Sequence[str]
) -> Optional[int]:
    """The distinct values of ``columns`` in the DT's latest version, counted from its files in
    this process where ``strategy.counts_held_rows_here`` says so for its ``size_bytes``; None
    where it does not, where a column is not found by its name, or where its values are not ones
    Arrow groups as the engine does (floats: the engine's DISTINCT equals 0.0 and -0.0; nested
    types)."""
    if not counts_held_rows_here(capabilities, size_bytes):
        return None
    snapshot = log.snapshot(log.latest_version())
    by_name = {f.name: f for f in snapshot.schema.fields}
    if any(c not in by_name for c in columns):
        return None
    schema = arrow_schema(StructType([by_name[c] for c in columns]))
    if any(pa.types.is_floating(f.type) or pa.types.is_nested(f.type) for f in schema):
        return None
    try:
        rows = live_rows(snapshot, schema)
    except NotReadableInProcess:
        return None
    return int(rows.group_by(list(columns)).aggregate([]).num_rows)


def _passed_down(project: Project, held: Dict[str, str]) -> Dict[str, str]:
    """``held`` for the columns of ``project``'s child that it passes up unchanged."""
    below: Dict[str, str] = {}
    for name, expression in zip(project.names, project.expressions):
        if name in held and isinstance(expression, exp.Column) and not expression.table:
            below.setdefault(expression.name, held[name])
    return below


def _row_wise(node: Node) -> bool:
    while isinstance(node, (Project, Filter)):
        node = node.child
    return isinstance(node, Scan)
