"""Delta table features of dynamic tables (docs/ARCHITECTURE.md, "Table features"):
`partition_by` through every refresh and rebuild, `persist_docs` comments in the Delta log,
`cluster_by` as Delta liquid clustering, dbt's `grants`; where the engine lacks one, a warning
names the engine and the model."""

from __future__ import annotations

from typing import Any, Dict

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture, write_file

from dbt.adapters.dyntable.delta_log import DeltaLog
from tests.functional.adapter.delta import delta_project
from tests.functional.dynamic_table.dvs import project_engine
from tests.functional.lifecycle.helpers import assert_refreshed, location
from tests.functional.runner.test_runner import dyntable
from tests.functional.sources import raw_sources

pytestmark = pytest.mark.jvm_ci

PARTITIONED = """
{{ config(materialized='dynamic_table', target_lag='1 minute', partition_by='region') }}
select id, region, amount from {{ source('raw', 'orders') }}
"""

PARTITIONED_REDEFINED = """
{{ config(materialized='dynamic_table', target_lag='1 minute', partition_by='region') }}
select id, region, amount, amount * 2 as doubled from {{ source('raw', 'orders') }}
"""

DOCUMENTED = """
{{ config(materialized='dynamic_table', target_lag='1 minute', persist_docs={'relation': true, 'columns': true}) }}
select id, region from {{ source('raw', 'orders') }}
"""

CLUSTERED = """
{{ config(materialized='dynamic_table', target_lag='1 minute', cluster_by=['region', 'id']) }}
select id, region, amount from {{ source('raw', 'orders') }}
"""

GRANTED = """
{{ config(materialized='dynamic_table', target_lag='1 minute', grants={'select': ['analysts']}) }}
select id from {{ source('raw', 'orders') }}
"""

SCHEMA = (
    raw_sources("orders")
    + """\
models:
  - name: documented
    description: "Orders by region, kept within a minute"
    columns:
      - name: id
        description: "The order's id"
      - name: region
        description: "Where it was placed"
"""
)


@pytest.fixture(scope="class")
def raw(project):
    schema = f"{project.test_schema}_raw"
    project.run_sql(f"create schema if not exists {schema}")
    project.run_sql(f"create table {schema}.orders (id bigint, region string, amount double) using delta")
    project.run_sql(
        f"insert into {schema}.orders values "
        + ", ".join(f"({i}, '{('eu', 'us', 'apac')[i % 3]}', {i}.5)" for i in range(12))
    )
    yield schema
    project.run_sql(f"drop schema if exists {schema} cascade")


def delta_log(project: Any, model: str) -> DeltaLog:
    return DeltaLog(str(location(project, f"{project.test_schema}.{model}")))


def snapshot(project: Any, model: str):
    log = delta_log(project, model)
    return log.snapshot(log.latest_version())


def comments(project: Any, model: str) -> Dict[str, str]:
    return {f.name: f.metadata.get("comment") for f in snapshot(project, model).schema.fields}


def flat(text: str) -> str:
    return " ".join(text.split())


class TestTableFeatures:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "partitioned.sql": PARTITIONED,
            "documented.sql": DOCUMENTED,
            "clustered.sql": CLUSTERED,
            "granted.sql": GRANTED,
            "schema.yml": SCHEMA,
        }

    def test_partitioning_survives_every_refresh_and_rebuild(self, project, raw, dyntable_warehouse):
        run_dbt(["run", "--select", "partitioned"])
        assert snapshot(project, "partitioned").partition_columns == ("region",)
        project.run_sql(f"insert into {raw}.orders values (100, 'eu', 1.0), (101, 'latam', 2.0)")
        run_dbt(["run", "--select", "partitioned"])
        assert_refreshed(project, dyntable_warehouse, "partitioned", ("INCREMENTAL", "FULL"))
        assert snapshot(project, "partitioned").partition_columns == ("region",)
        run_dbt(["run", "--select", "partitioned", "--full-refresh"])
        assert_refreshed(project, dyntable_warehouse, "partitioned", "REINITIALIZE", "--full-refresh")
        assert snapshot(project, "partitioned").partition_columns == ("region",)
        write_file(PARTITIONED_REDEFINED, project.project_root, "models", "partitioned.sql")
        run_dbt(["run", "--select", "partitioned"])  # a new output schema: replaced in place
        assert_refreshed(project, dyntable_warehouse, "partitioned", "REINITIALIZE")
        assert snapshot(project, "partitioned").partition_columns == ("region",)
        assert "doubled" in snapshot(project, "partitioned").schema.fieldNames()
        project.run_sql(f"delete from {raw}.orders where id = 100")
        run_dbt(["run", "--select", "partitioned"])
        assert_refreshed(project, dyntable_warehouse, "partitioned", ("INCREMENTAL", "FULL"))
        assert snapshot(project, "partitioned").partition_columns == ("region",)
        explained = flat(dyntable(project, "explain", "partitioned").output)
        assert "table features: partitioned by (region)" in explained

    def test_a_repartitioned_table_counts_its_new_rows(self, project, raw, dyntable_warehouse):
        """The embedded engine re-creates a table whose partitioning changes in its folder, where
        it ends at the version the old one had: what the rebuild reports is the new table's."""
        model = "{{ config(materialized='dynamic_table', target_lag='1 minute', partition_by='%s') }} "
        model += "select id, region from {{ source('raw', 'orders') }} where id < %d"
        write_file(model % ("region", 3), project.project_root, "models", "repartitioned.sql")
        run_dbt(["run", "--select", "repartitioned"])
        write_file(model % ("id", 5), project.project_root, "models", "repartitioned.sql")
        run_dbt(["run", "--select", "repartitioned"])
        row = assert_refreshed(project, dyntable_warehouse, "repartitioned", "REINITIALIZE")
        assert (row.rows_inserted, row.rows_deleted) == (5, 3)
        assert snapshot(project, "repartitioned").partition_columns == ("id",)

    def test_persist_docs_writes_comments_that_survive_rebuilds(self, project, raw, dyntable_warehouse):
        run_dbt(["run", "--select", "documented"])
        assert snapshot(project, "documented").description == "Orders by region, kept within a minute"
        assert comments(project, "documented") == {"id": "The order's id", "region": "Where it was placed"}
        run_dbt(["run", "--select", "documented", "--full-refresh"])
        assert_refreshed(project, dyntable_warehouse, "documented", "REINITIALIZE")
        assert snapshot(project, "documented").description == "Orders by region, kept within a minute"
        assert comments(project, "documented") == {"id": "The order's id", "region": "Where it was placed"}
        # A comment is no row: the next refresh of the DT is NO_DATA, not a rebuild.
        run_dbt(["run", "--select", "documented"])
        assert_refreshed(project, dyntable_warehouse, "documented", "NO_DATA")
        explained = flat(dyntable(project, "explain", "documented").output)
        assert "table features: comments on the table and 2 columns" in explained

        # A changed description: JVM Spark updates the comment; the embedded engine cannot, and says so.
        write_file(
            SCHEMA.replace("kept within a minute", "kept fresh"), project.project_root, "models", "schema.yml"
        )
        _, log = run_dbt_and_capture(["run", "--select", "documented"])
        if project_engine(project).name == "embedded":
            assert (
                f"Model 'documented': persist_docs could not update the comments of dynamic table "
                f"{project.test_schema}.documented: the embedded engine has no statement changing comments"
            ) in flat(log)
            assert snapshot(project, "documented").description == "Orders by region, kept within a minute"
        else:
            assert snapshot(project, "documented").description == "Orders by region, kept fresh"
        assert_refreshed(project, dyntable_warehouse, "documented", "NO_DATA")

    @pytest.mark.skip_profile("spark_session", reason="JVM Spark clusters: TestClusteringOnJvm")
    def test_cluster_by_warns_naming_the_engine(self, project, raw, dyntable_warehouse):
        _, log = run_dbt_and_capture(["run", "--select", "clustered"])
        text = flat(log)
        assert (
            f"Model 'clustered': cluster_by (region, id) is not applied to dynamic table "
            f"{project.test_schema}.clustered: the embedded engine has no Delta liquid clustering (CLUSTER BY)"
        ) in text, text
        assert_refreshed(project, dyntable_warehouse, "clustered", "REINITIALIZE")
        assert "clustering" not in snapshot(project, "clustered").writer_features
        explained = flat(dyntable(project, "explain", "clustered").output)
        assert (
            "cluster_by (region, id) not applied: the embedded engine has no Delta liquid clustering"
            in explained
        )

    @pytest.mark.skip_profile("spark_session", reason="grants on JVM Spark depend on its catalog")
    def test_grants_warn_naming_the_engine(self, project, raw, dyntable_warehouse):
        _, log = run_dbt_and_capture(["run", "--select", "granted"])
        text = flat(log)
        assert (
            f"Model 'granted': its grants are not applied to dynamic table {project.test_schema}.granted: "
            "the embedded engine has no grants (SHOW GRANTS / GRANT)"
        ) in text, text
        assert_refreshed(project, dyntable_warehouse, "granted", "REINITIALIZE")


@pytest.mark.skip_profile("embedded", reason="liquid clustering needs JVM Spark with delta-spark")
class TestClusteringOnJvm:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        return {"clustered.sql": CLUSTERED, "schema.yml": SCHEMA.split("models:")[0]}

    def clustering_columns(self, project):
        detail = (
            project_engine(project).execute(f"describe detail {project.test_schema}.clustered").collect()[0]
        )
        return list(detail.asDict()["clusteringColumns"])

    def test_cluster_by_is_liquid_clustering_through_rebuilds(self, project, raw, dyntable_warehouse):
        run_dbt(["run", "--select", "clustered"])
        assert "clustering" in snapshot(project, "clustered").writer_features
        assert self.clustering_columns(project) == ["region", "id"]
        project.run_sql(f"insert into {raw}.orders values (100, 'eu', 1.0)")
        run_dbt(["run", "--select", "clustered"])
        assert_refreshed(project, dyntable_warehouse, "clustered", ("INCREMENTAL", "FULL"))
        run_dbt(["run", "--select", "clustered", "--full-refresh"])
        assert_refreshed(project, dyntable_warehouse, "clustered", "REINITIALIZE")
        assert self.clustering_columns(project) == ["region", "id"]
        explained = flat(dyntable(project, "explain", "clustered").output)
        assert "clustered by (region, id) (Delta liquid clustering)" in explained


class TestBadFeatureConfig:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "both.sql": "{{ config(materialized='dynamic_table', target_lag='1 minute', partition_by='id', cluster_by='id') }} select 1 as id",
            "unknown.sql": "{{ config(materialized='dynamic_table', target_lag='1 minute', cluster_by='nope') }} select 1 as id",
        }

    def test_one_message_naming_model_and_fix(self, project):
        _, log = run_dbt_and_capture(["run"], expect_pass=False)
        text = flat(log)
        assert (
            "Model 'both': cluster_by and partition_by are both set. Delta liquid clustering replaces partitioning: keep one of them."
            in text
        )
        assert (
            "(model unknown): cluster_by nope is not a column of its query (its columns: id). Fix cluster_by or the query."
            in text
        )
