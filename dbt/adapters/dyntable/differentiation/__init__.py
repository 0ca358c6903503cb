"""Query differentiation: turn a dynamic table's SELECT into the SQL of its delta.

``plan_query`` lowers Spark SQL (sqlglot) to a small relational plan, inlining views and CTEs;
``differentiate`` applies one rule per operator (the modules of this package, each documenting its
derivative and cost) to get a consolidated Z-set delta over a :class:`SourceResolver`'s view of
the sources; ``explain`` shows the plan, the rule at each node and the generated SQL. Planning
never touches an engine.
"""

from dbt.adapters.dyntable.differentiation.derivative import DeltaQuery, Differentiator, differentiate
from dbt.adapters.dyntable.differentiation.errors import NotIncrementalizable
from dbt.adapters.dyntable.differentiation.explain import explain
from dbt.adapters.dyntable.differentiation.plan import Plan
from dbt.adapters.dyntable.differentiation.planner import plan_query
from dbt.adapters.dyntable.differentiation.resolver import SourceResolver, VersionDiffResolver

__all__ = [
    "DeltaQuery",
    "Differentiator",
    "NotIncrementalizable",
    "Plan",
    "SourceResolver",
    "VersionDiffResolver",
    "differentiate",
    "explain",
    "plan_query",
]
