"""Rule-level fixtures, readable as documentation of each derivative's shape.

``fixtures/plans.sql``: each query, then its output columns, row key, the plan tree with the rule
that differentiated each node, and how often the delta reads each source version (``@v0``,
``@v1``, ``@changes``) and the DT's stored rows (``dt``) when every source changed with updates.
Every delta is derived as a refresh derives it: with the DT's stored rows at hand. ``fixtures/errors.sql``: each
query, then the operator ``NotIncrementalizable`` names.
"""

from __future__ import annotations

from typing import List

import pytest

from dbt.adapters.dyntable.differentiation import NotIncrementalizable, differentiate, plan_query
from dbt.adapters.dyntable.differentiation.explain import SymbolicResolver, plan_tree, reads
from tests.unit.differentiation.fixtures_io import Fixture, read_fixtures

STORED = "`s`.`dt`"


def shape(sql: str) -> List[str]:
    plan = plan_query(sql)
    delta = differentiate(plan, SymbolicResolver(), stored=STORED)
    return [
        f"columns: {', '.join(plan.columns)}",
        f"row key: {plan.row_key}",
        *plan_tree(plan.root, delta.applied),
        f"reads: {reads(delta.sql)} dtx{delta.sql.count(STORED)}",
    ]


@pytest.mark.parametrize("fixture", read_fixtures("plans.sql"), ids=lambda f: f.title[:60])
def test_plan_and_derivative_shape(fixture: Fixture) -> None:
    assert shape(fixture.sql) == fixture.expected


@pytest.mark.parametrize("fixture", read_fixtures("errors.sql"), ids=lambda f: f.sql[:60])
def test_not_incrementalizable(fixture: Fixture) -> None:
    with pytest.raises(NotIncrementalizable) as raised:
        plan_query(fixture.sql)
    assert [raised.value.operator] == fixture.expected
    assert raised.value.reason and raised.value.fragment
