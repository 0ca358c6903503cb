"""`dbt docs generate` (dbt-tests-adapter's BaseDocsGenerate / BaseDocsGenReferences)."""

import pytest
from dbt.tests.adapter.basic import expected_catalog
from dbt.tests.adapter.basic.test_docs_generate import BaseDocsGenerate, BaseDocsGenReferences
from dbt.tests.util import run_dbt

from tests.functional.adapter.delta import delta_project

pytestmark = pytest.mark.jvm_ci


def zero_based_column_indexes(catalog):
    """dbt-spark numbers catalog columns from 0 (the position in DESCRIBE); the suite expects 1."""
    for node in list(catalog["nodes"].values()) + list(catalog["sources"].values()):
        # New column dicts: the suite shares them between nodes.
        node["columns"] = {
            name: {**column, "index": column["index"] - 1} if isinstance(column["index"], int) else column
            for name, column in node["columns"].items()
        }
    return catalog


@pytest.fixture(scope="class")
def table_owner(engine):
    """The owner the engine's catalog records for a table, which the catalog reports: JVM Spark's
    Hive metastore records the Spark user (the OS user running Spark); Sail records none."""
    return engine.spark.sparkContext.sparkUser() if engine.name == "session" else None


class DeltaDocsProject:
    @pytest.fixture(scope="class")
    def project_config_update(self, unique_schema):
        return delta_project(
            **{
                "asset-paths": ["assets", "invalid-asset-paths"],
                "vars": {"test_schema": unique_schema, "alternate_schema": unique_schema + "_test"},
                "seeds": {"quote_columns": True},
            }
        )


class TestDocsGenerate(DeltaDocsProject, BaseDocsGenerate):
    @pytest.fixture(scope="class")
    def expected_catalog(self, project, table_owner):
        return expected_catalog.base_expected_catalog(
            project,
            role=table_owner,
            id_type="bigint",
            text_type="string",
            time_type="timestamp",
            view_type="view",
            table_type="table",
            model_stats=expected_catalog.no_stats(),
        )


class TestDocsGenReferences(DeltaDocsProject, BaseDocsGenReferences):
    @pytest.fixture(scope="class")
    def expected_catalog(self, project, table_owner):
        return zero_based_column_indexes(
            expected_catalog.expected_references_catalog(
                project,
                role=table_owner,
                id_type="bigint",
                text_type="string",
                time_type="timestamp",
                bigint_type="bigint",
                view_type="view",
                table_type="table",
                model_stats=expected_catalog.no_stats(),
            )
        )


incremental_sql = """
{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id') }}
select 1 as id, 'a' as name
"""


class TestDocsGenerateAfterIncrementalRun:
    """The engine's session outlives one dbt command in this process: the temporary view an
    incremental run leaves in it must not reach the next command's catalog."""

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        return {"incremental_model.sql": incremental_sql}

    def test_catalog_lists_only_schema_relations(self, project):
        run_dbt(["run"])
        run_dbt(["run"])  # the incremental run creates incremental_model__dbt_tmp, a temporary view
        catalog = run_dbt(["docs", "generate", "--no-compile"])
        assert sorted(node.metadata.name for node in catalog.nodes.values()) == ["incremental_model"]
        assert not catalog.errors
