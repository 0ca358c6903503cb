"""Models built by the same `dbt run` / `dbt build` as the dynamic tables reading them: seeds,
tables, incremental models, snapshots and views over them are read at the version the invocation
produced, as upstream dynamic tables are (docs/ARCHITECTURE.md, "Reading sources")."""

from __future__ import annotations

import pytest
from dbt.tests.util import run_dbt, write_file

from tests.functional.adapter.delta import delta_project
from tests.functional.dynamic_table.dvs import metadata
from tests.functional.lifecycle.helpers import assert_refreshed, last

pytestmark = pytest.mark.jvm_ci


def reads(project, warehouse, model):
    """How the model's last refresh read each source, by table name."""
    frontier = metadata(warehouse).frontier(f"{project.test_schema}.{model}")
    return {name.split(".", 1)[1]: str(source.read) for name, source in frontier.sources.items()}


CUSTOMERS_SEED = """customer_id,country
1,GB
2,US
3,NL
"""

ORDERS_SEED = """order_id,customer_id,amount
10,1,50.0
11,1,70.0
12,2,30.0
13,3,200.0
"""

CUSTOMER_TABLE = "{{ config(materialized='table') }} select customer_id, upper(country) as country from {{ ref('customers') }}"

ORDERS_INCREMENTAL = """
{{ config(materialized='incremental', unique_key='order_id') }}
select order_id, customer_id, amount from {{ ref('orders') }}
{% if is_incremental() %} where order_id > (select coalesce(max(order_id), 0) from {{ this }}) {% endif %}
"""

ORDERS_VIEW = (
    "{{ config(materialized='view') }} select * from {{ ref('orders_incremental') }} where amount > 0"
)

SNAPSHOT = """
{% snapshot customers_snapshot %}
{{ config(target_schema=target.schema, unique_key='customer_id', strategy='check', check_cols=['country']) }}
select * from {{ ref('customers') }}
{% endsnapshot %}
"""

REVENUE = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}
select c.country, count(*) as orders, sum(o.amount) as revenue
from {{ ref('orders_view') }} as o join {{ ref('customer_table') }} as c on o.customer_id = c.customer_id
group by c.country
"""

SNAPSHOTTED = """
{{ config(materialized='dynamic_table', target_lag='1 minute') }}
select country, count(*) as versions from {{ ref('customers_snapshot') }} group by country
"""

SEEDED = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}
select country, count(*) as customers from {{ ref('customers') }} group by country
"""

DYNAMIC_TABLES = ("revenue", "snapshotted", "seeded")


class TestModelsOfTheSameInvocation:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def seeds(self):
        return {"customers.csv": CUSTOMERS_SEED, "orders.csv": ORDERS_SEED}

    @pytest.fixture(scope="class")
    def snapshots(self):
        return {"customers_snapshot.sql": SNAPSHOT}

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "customer_table.sql": CUSTOMER_TABLE,
            "orders_incremental.sql": ORDERS_INCREMENTAL,
            "orders_view.sql": ORDERS_VIEW,
            "revenue.sql": REVENUE,
            "snapshotted.sql": SNAPSHOTTED,
            "seeded.sql": SEEDED,
        }

    def test_dbt_build_works_on_every_run(self, project, dyntable_warehouse):
        run_dbt(["build"])
        for model in DYNAMIC_TABLES:
            row = assert_refreshed(project, dyntable_warehouse, model, "REINITIALIZE")
            assert row.refresh_trigger == "CREATION"
        assert reads(project, dyntable_warehouse, "revenue") == {
            "orders_incremental": "INVOCATION",
            "customer_table": "INVOCATION",
        }
        assert reads(project, dyntable_warehouse, "snapshotted") == {"customers_snapshot": "INVOCATION"}
        # The next build reloads the seeds, rebuilds the table and appends to the incremental
        # model: the DTs read each at the version this build produced.
        write_file(ORDERS_SEED + "14,2,5.0\n", project.project_root, "seeds", "orders.csv")
        write_file(CUSTOMERS_SEED.replace("3,NL", "3,de"), project.project_root, "seeds", "customers.csv")
        run_dbt(["build"])
        for model in DYNAMIC_TABLES:
            assert_refreshed(project, dyntable_warehouse, model, ("REINITIALIZE", "INCREMENTAL", "FULL"))
        assert project.run_sql(
            f"select revenue from {project.test_schema}.revenue where country = 'DE'", fetch="one"
        ) == (200.0,)
        run_dbt(["build"])  # nothing new: every DT still equals its query
        for model in DYNAMIC_TABLES:
            assert_refreshed(
                project, dyntable_warehouse, model, ("NO_DATA", "REINITIALIZE", "INCREMENTAL", "FULL")
            )

    def test_dbt_run_of_a_dt_over_a_table_model_on_every_run(self, project, dyntable_warehouse):
        run_dbt(["seed"])
        run_dbt(["run"])
        assert_refreshed(project, dyntable_warehouse, "revenue", ("REINITIALIZE", "INCREMENTAL", "NO_DATA"))
        assert last(project, dyntable_warehouse, "revenue").source_versions
        # The table model is rebuilt with the same rows: its net change is nothing.
        run_dbt(["run"])
        row = assert_refreshed(
            project, dyntable_warehouse, "revenue", "NO_DATA", "customer_table was rewritten"
        )
        assert row.source_versions

    def test_a_dt_run_alone_reads_what_earlier_invocations_built(self, project, dyntable_warehouse):
        run_dbt(["build"])
        write_file(ORDERS_SEED + "15,1,9.0\n", project.project_root, "seeds", "orders.csv")
        run_dbt(["seed"])
        run_dbt(["run", "--select", "orders_incremental"])
        run_dbt(["run", "--select", "revenue"])  # built by earlier invocations: read as of T
        assert_refreshed(project, dyntable_warehouse, "revenue", "INCREMENTAL")
        assert reads(project, dyntable_warehouse, "revenue") == {
            "orders_incremental": "AS_OF",
            "customer_table": "AS_OF",
        }
