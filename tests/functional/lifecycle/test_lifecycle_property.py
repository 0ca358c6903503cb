"""Property: through any history of what users and tools do to sources and dynamic tables —
inserts, updates and deletes, a source reseeded or dropped and re-created (ending at any version
number, the consumed one included), a source restored to an earlier version, a DT dropped by hand
or rebuilt with a full refresh — after every refresh each DT equals its query at its data
timestamp, as a multiset (docs/ARCHITECTURE.md, "Reading sources").

Histories drive the refresh service on the session's engine (embedded or JVM Spark), with four
DTs: a join with a group-by, a filter over a join, the first row per partition, and a DT over a
DT. Each example starts from fresh tables and its own metadata schema; a failure prints the
history that produced it. Profiles: ``fast`` by default, ``long`` with
``DYNTABLE_HYPOTHESIS_PROFILE=long`` (see tests/functional/differentiation/conftest.py).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any, Dict, List, Tuple

import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dbt.adapters.dyntable.dynamic_table.config import DynamicTableConfig
from dbt.adapters.dyntable.dynamic_table.lifecycle import RefreshRequest, Trigger
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService
from dbt.adapters.dyntable.dynamic_table.verify import check_dvs
from tests.functional.dynamic_table.dvs import project_engine

pytestmark = pytest.mark.jvm_ci

DTS = {
    "by_country": (
        "select c.country, count(*) as orders, sum(o.amount) as revenue "
        "from {s}.orders o join {s}.customers c on o.customer_id = c.customer_id group by c.country"
    ),
    "big_orders": (
        "select o.id, c.country, o.amount * 2 as doubled "
        "from {s}.orders o join {s}.customers c on o.customer_id = c.customer_id where o.amount > 2"
    ),
    "top_order": (
        "select customer_id, id, amount from (select customer_id, id, amount, row_number() over "
        "(partition by customer_id order by amount desc, id) as rk from {s}.orders) r where rk = 1"
    ),
    "busy_countries": "select country, orders from {s}.by_country where orders > 1",
}
ORDER = ("by_country", "big_orders", "top_order", "busy_countries")

customer_ids = st.integers(0, 4)
amounts = st.integers(0, 6)
countries = st.sampled_from(["'gb'", "'us'", "'nl'", "null"])
order_rows = st.lists(st.tuples(customer_ids, amounts), min_size=0, max_size=5)
customer_rows = st.lists(st.tuples(customer_ids, countries), min_size=0, max_size=5)

operations = st.one_of(
    st.tuples(st.just("insert orders"), order_rows),
    st.tuples(st.just("update orders"), customer_ids),
    st.tuples(st.just("delete orders"), amounts),
    st.tuples(st.just("insert customers"), customer_rows),
    st.tuples(st.just("reseed customers"), customer_rows),
    st.tuples(st.just("recreate orders"), st.tuples(order_rows, st.integers(0, 4))),
    st.tuples(st.just("restore orders"), st.integers(1, 3)),
    st.tuples(st.just("drop a dynamic table"), st.sampled_from(ORDER)),
    st.tuples(st.just("full refresh"), st.sampled_from(ORDER)),
    st.tuples(st.just("refresh"), st.none()),
)
histories = st.lists(operations, min_size=3, max_size=9)


class History:
    """One example: fresh source tables and DTs in a schema of its own, and what was done."""

    def __init__(self, engine: Any, warehouse: Any) -> None:
        self.engine = engine
        self.schema = f"prop_{uuid.uuid4().hex[:8]}"
        self.service = DynamicTableService(engine, warehouse, f"{self.schema}_meta")
        self.dts = {
            name: DynamicTable(
                self.schema,
                name,
                sql.format(s=self.schema),
                DynamicTableConfig.from_model(name, {"target_lag": "1 minute"}),
            )
            for name, sql in DTS.items()
        }
        self.done: List[str] = []
        self.sql(f"create schema {self.schema}")
        self.create("orders", "id bigint, customer_id bigint, amount double", [])
        self.create("customers", "customer_id bigint, country string", [(1, "'gb'"), (2, "'us'")])
        self.next_id = 0
        self.insert_orders([(1, 3), (2, 5), (1, 1)])

    def sql(self, statement: str) -> None:
        self.done.append(statement)
        self.engine.execute(statement).collect()

    def create(self, table: str, columns: str, rows: List[Tuple[Any, ...]]) -> None:
        self.sql(f"create table {self.schema}.{table} ({columns}) using delta")
        if rows:
            self.sql(f"insert into {self.schema}.{table} values " + ", ".join(f"({a}, {b})" for a, b in rows))

    def insert_orders(self, rows: List[Tuple[int, int]]) -> None:
        if rows:
            values = []
            for customer, amount in rows:
                self.next_id += 1
                values.append(f"({self.next_id}, {customer}, {amount}.0)")
            self.sql(f"insert into {self.schema}.orders values " + ", ".join(values))

    def apply(self, operation: str, argument: Any) -> None:
        s = self.schema
        if operation == "insert orders":
            self.insert_orders(argument)
        elif operation == "update orders":
            self.sql(f"update {s}.orders set amount = amount + 1 where customer_id = {argument}")
        elif operation == "delete orders":
            self.sql(f"delete from {s}.orders where amount = {argument}.0")
        elif operation == "insert customers" and argument:
            self.sql(f"insert into {s}.customers values " + ", ".join(f"({a}, {b})" for a, b in argument))
        elif operation == "reseed customers":
            self.sql(f"drop table {s}.customers")
            self.create("customers", "customer_id bigint, country string", argument)
        elif operation == "recreate orders":
            rows, writes = argument
            self.sql(f"drop table {s}.orders")
            self.create("orders", "id bigint, customer_id bigint, amount double", [])
            for _ in range(writes):
                self.insert_orders(rows)
        elif operation == "restore orders":
            table = DeltaTable(self.engine.table_location(s, "orders"))
            target = table.version() - argument
            if target >= 0:
                self.done.append(f"restore {s}.orders to version {target}")
                table.restore(target)
        elif operation == "drop a dynamic table":
            self.sql(f"drop table if exists {s}.{argument}")
        elif operation == "full refresh":
            self.refresh(full=argument)
        elif operation == "refresh":
            self.refresh()

    def refresh(self, full: str = "") -> None:
        """Every DT in dependency order at one data timestamp, then the contract for each."""
        request = RefreshRequest(datetime.now(timezone.utc), Trigger.MANUAL)
        self.done.append(f"refresh{' (full: ' + full + ')' if full else ''}")
        outcomes: Dict[str, str] = {}
        for name in ORDER:
            dt = self.dts[name]
            result = self.service.refresh(
                dt, RefreshRequest(request.data_timestamp, Trigger.MANUAL, name == full)
            )
            outcomes[name] = f"{result.action} {result.state}: {result.reason}"
            assert result.state == "SUCCEEDED", self.report(outcomes)
        for name in ORDER:
            check = check_dvs(self.engine, self.service.metadata, self.dts[name].name)
            assert check.ok, self.report(outcomes) + f"\n{name}: {check.detail}"

    def report(self, outcomes: Dict[str, str]) -> str:
        return "\n".join(
            ["history:", *self.done, "refreshes:", *(f"  {k}: {v}" for k, v in outcomes.items())]
        )

    def drop(self) -> None:
        self.engine.execute(f"drop schema if exists {self.schema} cascade").collect()


class TestLifecycleProperty:
    @settings(
        max_examples=max(6, settings.default.max_examples // 40),
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(history=histories)
    def test_every_refresh_equals_the_query_through_any_history(self, project, dyntable_warehouse, history):
        example = History(project_engine(project), dyntable_warehouse)
        try:
            example.refresh()
            for operation, argument in history:
                example.apply(operation, argument)
            example.refresh()
        finally:
            example.drop()
