"""Sources are identities, not version numbers (docs/ARCHITECTURE.md, "Reading sources").

Each case does to a warehouse what dbt users and their tools do every day — reload a seed,
drop and re-create a table, restore it, rebuild a dynamic table by hand, lose the newest commits
of a log — and then runs dbt as a user would: the dynamic tables must equal their queries at
their data timestamps, with the reason for what they did in the refresh history.
"""

from __future__ import annotations

import shutil

import pytest
from dbt.tests.util import run_dbt, write_file

from tests.functional.adapter.delta import delta_project
from tests.functional.dynamic_table.dvs import history
from tests.functional.lifecycle.helpers import (
    assert_refreshed,
    commits,
    drop_last_commits,
    location,
    metadata_table,
    restore,
)
from tests.functional.sources import raw_sources

pytestmark = pytest.mark.jvm_ci

SEED = """customer_id,country,credit
1,GB,10
2,US,20
3,NL,30
4,US,40
"""

ORDERS_BY_COUNTRY = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}
select c.country, count(*) as orders, sum(o.amount) as revenue, sum(c.credit) as credit
from {{ source('raw', 'orders') }} as o
join {{ ref('customers') }} as c on o.customer_id = c.customer_id
group by c.country
"""

BIG_COUNTRIES = """
{{ config(materialized='dynamic_table', target_lag='1 minute') }}
select country, revenue from {{ ref('orders_by_country') }} where revenue > 100
"""

SOURCES = raw_sources("orders")

MODELS = ("orders_by_country", "big_countries")


@pytest.fixture(scope="class")
def raw(project):
    schema = f"{project.test_schema}_raw"
    project.run_sql(f"create schema if not exists {schema}")
    create_orders(project, schema)
    yield schema
    project.run_sql(f"drop schema if exists {schema} cascade")


def create_orders(project, schema: str) -> None:
    project.run_sql(
        f"create table {schema}.orders (order_id bigint, customer_id bigint, amount double) using delta"
    )
    project.run_sql(
        f"insert into {schema}.orders values (1, 1, 50.0), (2, 1, 70.0), (3, 2, 30.0), (4, 3, 200.0), (5, 4, 15.0)"
    )


class TestSourceIdentity:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def seeds(self):
        return {"customers.csv": SEED}

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "orders_by_country.sql": ORDERS_BY_COUNTRY,
            "big_countries.sql": BIG_COUNTRIES,
            "sources.yml": SOURCES,
        }

    def build(self, project, raw, warehouse):
        """Every test starts from freshly built DTs and seed (the class shares one project)."""
        run_dbt(["seed", "--full-refresh"])
        run_dbt(["run", "--full-refresh"])
        for model in MODELS:
            assert_refreshed(project, warehouse, model, "REINITIALIZE")

    def test_a_reloaded_seed_is_a_new_table_even_at_the_same_version(self, project, raw, dyntable_warehouse):
        self.build(project, raw, dyntable_warehouse)
        seed = location(project, f"{project.test_schema}.customers")
        consumed = len(commits(seed))
        write_file(SEED.replace("3,NL,30", "3,NL,7000"), project.project_root, "seeds", "customers.csv")
        run_dbt(["seed", "--full-refresh"])  # dropped and created anew (a plain `dbt seed` keeps it)
        assert len(commits(seed)) == consumed  # the reloaded seed's log ends at the same version
        run_dbt(["run"])
        assert_refreshed(
            project,
            dyntable_warehouse,
            "orders_by_country",
            "REINITIALIZE",
            f"{project.test_schema}.customers:",
            "not the commit consumed",
        )
        # Its upstream was overwritten in one commit of its own history: a change like any other.
        assert_refreshed(project, dyntable_warehouse, "big_countries", ("INCREMENTAL", "FULL"))
        project.run_sql(f"insert into {raw}.orders values (6, 3, 1.0)")
        run_dbt(["run"])
        assert_refreshed(project, dyntable_warehouse, "orders_by_country", "INCREMENTAL")

    def test_a_source_re_created_with_more_versions_than_consumed(self, project, raw, dyntable_warehouse):
        self.build(project, raw, dyntable_warehouse)
        orders = location(project, f"{raw}.orders")
        consumed = len(commits(orders))
        project.run_sql(f"drop table {raw}.orders")
        create_orders(project, raw)
        for order_id in range(100, 100 + consumed + 2):
            project.run_sql(f"insert into {raw}.orders values ({order_id}, 2, 1.5)")
        assert len(commits(orders)) > consumed
        run_dbt(["run"])
        assert_refreshed(project, dyntable_warehouse, "orders_by_country", "REINITIALIZE", f"{raw}.orders:")
        assert_refreshed(project, dyntable_warehouse, "big_countries", ("INCREMENTAL", "FULL"))

    def test_a_source_re_created_with_fewer_versions_than_consumed(self, project, raw, dyntable_warehouse):
        for order_id in range(200, 204):
            project.run_sql(f"insert into {raw}.orders values ({order_id}, 4, 9.0)")
        self.build(project, raw, dyntable_warehouse)
        project.run_sql(f"drop table {raw}.orders")
        create_orders(project, raw)
        run_dbt(["run"])
        assert_refreshed(
            project,
            dyntable_warehouse,
            "orders_by_country",
            "REINITIALIZE",
            f"{raw}.orders:",
            "its log ends at version",
        )

    def test_a_restored_source(self, project, raw, dyntable_warehouse):
        self.build(project, raw, dyntable_warehouse)
        orders = location(project, f"{raw}.orders")
        before_deletes = len(commits(orders)) - 1
        project.run_sql(f"delete from {raw}.orders where customer_id = 1")
        run_dbt(["run"])
        assert_refreshed(project, dyntable_warehouse, "orders_by_country", "INCREMENTAL")
        restore(orders, before_deletes)
        run_dbt(["run"])
        assert_refreshed(
            project,
            dyntable_warehouse,
            "orders_by_country",
            "REINITIALIZE",
            f"{raw}.orders:",
            "restored to version",
        )

    def test_a_dynamic_table_rebuilt_by_hand_to_the_same_version(self, project, raw, dyntable_warehouse):
        self.build(project, raw, dyntable_warehouse)
        project.run_sql(f"insert into {raw}.orders values (7, 2, 500.0)")
        run_dbt(["run"])
        upstream = f"{project.test_schema}.orders_by_country"
        version = len(commits(location(project, upstream))) - 1
        project.run_sql(f"drop table {upstream}")
        project.run_sql(
            f"create table {upstream} (country string, orders bigint, revenue double, credit bigint) using delta"
        )
        while len(commits(location(project, upstream))) - 1 < version:
            project.run_sql(f"insert into {upstream} values ('XX', 1, 999.0, 1)")
        run_dbt(["run"])
        assert_refreshed(project, dyntable_warehouse, "orders_by_country", "REINITIALIZE", "this table:")
        assert_refreshed(project, dyntable_warehouse, "big_countries", "REINITIALIZE", f"{upstream}:")

    def test_rows_written_into_a_dynamic_table_are_not_patched_over(self, project, raw, dyntable_warehouse):
        self.build(project, raw, dyntable_warehouse)
        project.run_sql(f"insert into {project.test_schema}.orders_by_country values ('ZZ', 5, 5.0, 5)")
        project.run_sql(f"insert into {raw}.orders values (8, 1, 1.0)")
        run_dbt(["run"])
        assert_refreshed(
            project, dyntable_warehouse, "orders_by_country", "REINITIALIZE", "changed outside dbt-dyntable"
        )

    def test_a_dynamic_table_losing_its_newest_commit(self, project, raw, dyntable_warehouse):
        self.build(project, raw, dyntable_warehouse)
        project.run_sql(f"update {raw}.orders set amount = amount + 1 where customer_id = 2")
        run_dbt(["run"])
        assert_refreshed(project, dyntable_warehouse, "orders_by_country", "INCREMENTAL")
        drop_last_commits(location(project, f"{project.test_schema}.orders_by_country"), 1)
        project.run_sql(f"insert into {raw}.orders values (9, 3, 3.0)")
        run_dbt(["run"])
        assert_refreshed(
            project, dyntable_warehouse, "orders_by_country", "REINITIALIZE", "its log ends at version"
        )

    def test_the_frontier_table_losing_its_newest_commits(self, project, raw, dyntable_warehouse, tmp_path):
        self.build(project, raw, dyntable_warehouse)
        frontiers = metadata_table(dyntable_warehouse)
        backup = tmp_path / "frontiers"
        shutil.copytree(frontiers, backup)
        project.run_sql(f"insert into {raw}.orders values (10, 4, 400.0)")
        run_dbt(["run"])
        assert_refreshed(project, dyntable_warehouse, "orders_by_country", "INCREMENTAL")
        # The frontier table is restored from that backup: its log ends before that refresh (the
        # checkpoint it wrote since is gone too), while the DTs' own logs went on.
        shutil.rmtree(frontiers)
        shutil.copytree(backup, frontiers)
        project.run_sql(f"insert into {raw}.orders values (11, 4, 1.0)")
        run_dbt(["run"])
        # orders_by_country's lost refresh folded the insert in this process, and big_countries's
        # wrote the rows of its recompute that differ: each commit carried its intent ("Exactly
        # once"), so their frontiers come back from them.
        assert_refreshed(project, dyntable_warehouse, "orders_by_country", "INCREMENTAL")
        assert_refreshed(project, dyntable_warehouse, "big_countries", ("INCREMENTAL", "FULL"))
        for model in ("orders_by_country", "big_countries"):
            recovered = [
                (r.state, r.reason)
                for r in history(dyntable_warehouse, f"{project.test_schema}.{model}")
                if r.refresh_trigger == "RECOVERY"
            ]
            assert recovered == [
                ("SUCCEEDED", "a commit carrying the intent of an unrecorded refresh found at start")
            ], model

    def test_a_compacted_dynamic_table_is_not_rebuilt(self, project, raw, dyntable_warehouse):
        from deltalake import DeltaTable

        self.build(project, raw, dyntable_warehouse)
        for order_id in range(20, 24):
            project.run_sql(f"insert into {raw}.orders values ({order_id}, {order_id % 4 + 1}, 2.0)")
            run_dbt(["run", "--select", "orders_by_country"])
        DeltaTable(str(location(project, f"{project.test_schema}.orders_by_country"))).optimize.compact()
        project.run_sql(f"insert into {raw}.orders values (30, 1, 2.0)")
        run_dbt(["run"])
        assert_refreshed(project, dyntable_warehouse, "orders_by_country", "INCREMENTAL")
        assert_refreshed(project, dyntable_warehouse, "big_countries", ("INCREMENTAL", "FULL"))
