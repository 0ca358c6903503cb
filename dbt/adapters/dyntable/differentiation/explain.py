"""``explain``: the plan tree, the rule differentiating each node, and the delta SQL, or the
reason the query cannot be maintained incrementally."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, List, Mapping, Optional, Tuple, Union

from dbt.adapters.dyntable.delta_log.model import ValueRange
from dbt.adapters.dyntable.differentiation.derivative import READ_BY_PARENT, DeltaQuery, differentiate
from dbt.adapters.dyntable.differentiation.errors import NotIncrementalizable
from dbt.adapters.dyntable.differentiation.plan import Node, Plan
from dbt.adapters.dyntable.differentiation.planner import plan_query
from dbt.adapters.dyntable.differentiation.pruning import Within, restricted
from dbt.adapters.dyntable.differentiation.resolver import SourceResolver
from dbt.adapters.dyntable.vocabulary import quoted_table


class SymbolicResolver:
    """Names each source's versions symbolically (``t@v0``, ``t@v1``, ``t@changes``), for reading
    a derivative's shape without an engine; every table counts as changed with updates."""

    def before(self, table: str, bound: Optional[Within] = None) -> str:
        return restricted(quoted_table(table + "@v0"), bound)

    def after(self, table: str, bound: Optional[Within] = None) -> str:
        return restricted(quoted_table(table + "@v1"), bound)

    def changes(self, table: str) -> str:
        return quoted_table(table + "@changes")

    def is_unchanged(self, table: str) -> bool:
        return False

    def is_insert_only(self, table: str) -> bool:
        return False

    def value_range(self, table: str, column: str) -> Optional[ValueRange]:
        return None

    def size_bytes(self, table: str) -> Optional[int]:
        return None


def plan_tree(node: Node, applied: Mapping[int, str], depth: int = 0) -> List[str]:
    """One line per node, indented by depth: the operator, then the formula that differentiated
    it in the delta ``applied`` comes from (:attr:`DeltaQuery.applied`)."""
    lines = [f"{'  ' * depth}{node.describe()}  <= {applied.get(id(node), READ_BY_PARENT)}"]
    for child in node.children:
        lines.extend(plan_tree(child, applied, depth + 1))
    return lines


def row_key(plan: Plan) -> str:
    """The plan's row key in words: proven, resting on declared keys, or none."""
    if plan.row_key is None:
        return "(none: rows are a multiset)"
    listed = ", ".join(plan.row_key) or "(none: always one row)"
    return f"{listed} (from keys declared on its tables)" if plan.row_key_is_declared else listed


def source_reads(delta_sql: str) -> Counter[Tuple[str, str]]:
    """How often a symbolic delta reads each source version: ``(table, "v0" | "v1" | "changes")``."""
    return Counter(
        (name.replace("`", ""), version)
        for name, version in re.findall(r"((?:`[^`]+`\.)*`[^`]+)@(v0|v1|changes)`", delta_sql)
    )


def reads(delta_sql: str) -> str:
    """How often a symbolic delta reads each source version (``t@v0``, ``t@v1``, ``t@changes``):
    the cost shape of a derivative."""
    found = source_reads(delta_sql)
    return " ".join(f"{name}@{version}x{count}" for (name, version), count in sorted(found.items()))


def explain(
    sql_or_plan: Union[str, Plan],
    resolver: Optional[SourceResolver] = None,
    stored: Optional[str] = None,
    **plan_options: Any,
) -> str:
    """A readable report of how ``sql_or_plan`` is differentiated. ``plan_options`` are passed to
    :func:`plan_query`; without ``resolver``, sources are named symbolically. ``stored`` names the
    relation holding the result (the DT), as refreshes pass it to :func:`differentiate`."""
    if isinstance(sql_or_plan, Plan):
        plan = sql_or_plan
    else:
        try:
            plan = plan_query(sql_or_plan, **plan_options)
        except NotIncrementalizable as error:
            return (
                "NOT INCREMENTALIZABLE\n"
                f"  operator: {error.operator}\n  reason: {error.reason}\n  fragment: {error.fragment}"
            )
    return report(plan, differentiate(plan, resolver or SymbolicResolver(), stored=stored))


def report(plan: Plan, delta: DeltaQuery) -> str:
    """The plan, the formula that differentiated each node, and the delta's SQL."""
    lines = [
        f"columns: {', '.join(plan.columns)}",
        f"row key: {row_key(plan)}",
        f"sources: {', '.join(plan.sources)}",
        f"monotone: {plan.is_monotone()} (with insert-only sources, the delta only inserts)",
        f"insert only: {delta.insert_only}",
        "plan:",
        *plan_tree(plan.root, delta.applied, 1),
        "delta SQL:",
        delta.sql,
    ]
    return "\n".join(lines)
