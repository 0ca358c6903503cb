"""Building and reading the plan's SQL expressions: its columns, conjunctions, output names."""

from __future__ import annotations

from typing import List, Optional, Sequence, cast

from sqlglot import exp

from dbt.adapters.dyntable.differentiation.sqltext import expr


def column(name: str) -> exp.Column:
    return exp.column(name, quoted=True)


def conjuncts(condition: Optional[exp.Expression]) -> List[exp.Expression]:
    if condition is None:
        return []
    if isinstance(condition, exp.And):
        return conjuncts(condition.this) + conjuncts(condition.expression)
    if isinstance(condition, exp.Paren):
        return conjuncts(condition.this)
    return [condition]


def conjunction(parts: Sequence[exp.Expression]) -> Optional[exp.Expression]:
    return cast(exp.Expression, exp.and_(*parts)) if parts else None


def output_name(item: exp.Expression) -> str:
    """The column name Spark gives a select item (aliases and plain columns keep theirs)."""
    if isinstance(item, exp.Alias):
        return item.alias
    if isinstance(item, exp.Column):
        return item.name
    if isinstance(item, exp.Dot):
        return item.name
    return expr(item).lower()
