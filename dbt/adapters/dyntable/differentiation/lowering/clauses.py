"""The clauses the planner understands, and the refusal of those it does not."""

from __future__ import annotations

from typing import FrozenSet

from sqlglot import exp

from dbt.adapters.dyntable.differentiation.errors import NotIncrementalizable
from dbt.adapters.dyntable.differentiation.sqltext import expr

#: Clauses the planner understands (ORDER BY, SORT/CLUSTER/DISTRIBUTE BY and hints only arrange
#: rows and are dropped); anything else (QUALIFY, TABLESAMPLE, PIVOT, LATERAL VIEW, ...) is refused
#: rather than silently ignored.
SELECT_CLAUSES = frozenset(
    {
        "expressions",
        "from_",
        "joins",
        "where",
        "group",
        "having",
        "distinct",
        "with_",
        "hint",
        "order",
        "sort",
        "cluster",
        "distribute",
        "kind",
        "limit",
        "offset",
    }
)
TABLE_CLAUSES = frozenset({"this", "db", "catalog", "alias", "hints"})
JOIN_CLAUSES = frozenset({"this", "on", "using", "side", "kind", "method", "hint"})
UNION_CLAUSES = frozenset({"this", "expression", "distinct", "with_", "order", "limit", "offset"})


def refuse_unknown_clauses(node: exp.Expression, understood: FrozenSet[str]) -> None:
    for clause, value in node.args.items():
        if clause not in understood and value not in (None, False, []):
            raise NotIncrementalizable(
                clause, expr(node)[:200], f"{clause} is not supported in a dynamic table's query"
            )


def refuse_limit(query: exp.Expression) -> None:
    for arg in ("limit", "offset", "fetch"):
        if query.args.get(arg) is not None:
            raise NotIncrementalizable(
                "limit",
                expr(query.args[arg]),
                "LIMIT/OFFSET picks rows by position, so a change anywhere can change which rows are kept",
            )
