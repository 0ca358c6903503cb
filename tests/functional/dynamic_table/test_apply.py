"""Applying Z-set deltas to a DT: bag semantics and the production validations (seed 000 §6.1)."""

from __future__ import annotations

from collections import Counter

import pytest
from deltalake import DeltaTable

from dbt.adapters.dyntable.dynamic_table.apply import DeltaApplier, DeltaValidationError
from dbt.adapters.dyntable.dynamic_table.config import DynamicTableConfig
from dbt.adapters.dyntable.dynamic_table.refresh import DynamicTable

COLUMNS = ["k", "v"]


@pytest.fixture
def dt(embedded_engine, request):
    schema = "apply_" + request.node.name.lower().replace("[", "_").replace("]", "").replace("-", "_")[:40]
    embedded_engine.execute(f"create schema if not exists {schema}")
    embedded_engine.execute(f"create table {schema}.dt (k bigint, v string) using delta")
    embedded_engine.execute(
        f"insert into {schema}.dt values (1, 'a'), (1, 'a'), (2, null), (3, 'c')"
    )
    table = DynamicTable(schema, "dt", "select 1", DynamicTableConfig.from_model("dt", {"target_lag": "1 minute"}))
    yield table
    embedded_engine.execute(f"drop schema {schema} cascade")


def contents(engine, dt):
    return Counter(map(tuple, engine.execute(f"select k, v from {dt.relation}").collect()))


def version(engine, dt):
    return DeltaTable(engine.table_location(dt.schema, dt.identifier)).version()


def delta_sql(rows):
    values = ", ".join(f"({k}, {'null' if v is None else repr(v)}, {w})" for k, v, w in rows)
    return f"select k, v, _dyn_weight from values {values} as d(k, v, _dyn_weight)"


def test_bag_semantics_delete_one_of_two_copies_and_insert_duplicates(embedded_engine, dt):
    applier = DeltaApplier(embedded_engine, dt)
    prepared = applier.prepare(delta_sql([(1, "a", -1), (2, None, 1), (4, "d", 2)]), COLUMNS)
    assert applier.apply(prepared) == (3, 1)
    assert contents(embedded_engine, dt) == Counter(
        {(1, "a"): 1, (2, None): 2, (3, "c"): 1, (4, "d"): 2}
    )


def test_insert_only_delta_is_one_commit(embedded_engine, dt):
    applier = DeltaApplier(embedded_engine, dt)
    before = version(embedded_engine, dt)
    applier.apply(applier.prepare(delta_sql([(5, "e", 1), (1, "a", 1)]), COLUMNS))
    assert version(embedded_engine, dt) == before + 1
    assert contents(embedded_engine, dt)[(1, "a")] == 3


def test_deleting_a_row_that_is_not_there_fails_and_leaves_the_dt(embedded_engine, dt):
    applier = DeltaApplier(embedded_engine, dt)
    before = (version(embedded_engine, dt), contents(embedded_engine, dt))
    with pytest.raises(DeltaValidationError, match="deletes rows the table does not hold"):
        applier.prepare(delta_sql([(3, "c", -2)]), COLUMNS)
    with pytest.raises(DeltaValidationError, match="deletes rows the table does not hold"):
        applier.prepare(delta_sql([(9, "z", -1), (4, "d", 1)]), COLUMNS)
    assert (version(embedded_engine, dt), contents(embedded_engine, dt)) == before


def test_unconsolidated_delta_fails_and_leaves_the_dt(embedded_engine, dt):
    applier = DeltaApplier(embedded_engine, dt)
    before = (version(embedded_engine, dt), contents(embedded_engine, dt))
    with pytest.raises(DeltaValidationError, match="more than once"):
        applier.prepare(delta_sql([(4, "d", 1), (4, "d", 1)]), COLUMNS)
    with pytest.raises(DeltaValidationError, match="weight 0"):
        applier.prepare(delta_sql([(4, "d", 0)]), COLUMNS)
    assert (version(embedded_engine, dt), contents(embedded_engine, dt)) == before
