"""A refresh's delta is typed as the DT stores its rows before its last consolidation, so it holds
no tuple twice as the DT will hold it (docs/ARCHITECTURE.md, "Applying"): the apply stage then does
not ask the engine to count each tuple's rows."""

from __future__ import annotations

from typing import List, Optional, Tuple

import sqlglot
from sqlglot import exp

from dbt.adapters.dyntable.differentiation import differentiate, plan_query
from dbt.adapters.dyntable.differentiation.explain import SymbolicResolver

QUERY = "select k as key, sum(v) as total from s.t group by k"


def consolidated_projection(sql: str) -> List[Tuple[str, Optional[str]]]:
    """The columns of the projection the delta's last consolidation groups: each one's name, and
    the type it is cast to (None: not cast)."""
    main = sqlglot.parse_one(sql, read="spark")
    main.set("with", None)
    grouping = next(select for select in main.find_all(exp.Select) if select.args.get("group") is not None)
    projection = grouping.find(exp.Subquery).this
    return [
        (column.alias, column.this.to.sql(dialect="spark") if isinstance(column.this, exp.Cast) else None)
        for column in projection.expressions
    ]


def test_the_columns_the_dt_types_are_cast_before_the_last_consolidation() -> None:
    plan = plan_query(QUERY)
    typed = differentiate(plan, SymbolicResolver(), types={"total": "decimal(20,2)"}).sql
    assert consolidated_projection(typed) == [
        ("key", None),
        ("total", "DECIMAL(20, 2)"),
        ("_dyn_weight", None),
    ]


def test_without_types_the_delta_keeps_the_query_s_types() -> None:
    untyped = differentiate(plan_query(QUERY), SymbolicResolver()).sql
    assert consolidated_projection(untyped) == [("key", None), ("total", None), ("_dyn_weight", None)]


def test_types_are_matched_by_the_dt_s_column_name_in_any_case() -> None:
    typed = differentiate(
        plan_query(QUERY.replace("as key", "as Key")), SymbolicResolver(), types={"key": "bigint"}
    ).sql
    assert consolidated_projection(typed)[0] == ("Key", "BIGINT")
