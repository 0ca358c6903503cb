"""dbt-tests-adapter's incremental suites, configured as dbt-spark configures its Delta runs."""

import pytest
from dbt.tests.adapter.incremental.test_incremental_merge_exclude_columns import (
    BaseMergeExcludeColumns,
)
from dbt.tests.adapter.incremental.test_incremental_microbatch import BaseMicrobatch
from dbt.tests.adapter.incremental.test_incremental_on_schema_change import (
    BaseIncrementalOnSchemaChangeSetup,
)
from dbt.tests.adapter.incremental.test_incremental_predicates import BaseIncrementalPredicates
from dbt.tests.adapter.incremental.test_incremental_unique_id import BaseIncrementalUniqueKey
from dbt.tests.util import run_dbt

from tests.functional.adapter.delta import delta_project


@pytest.mark.jvm_ci
class TestIncrementalUniqueKey(BaseIncrementalUniqueKey):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project(models={"+incremental_strategy": "merge"})


class TestMergeExcludeColumns(BaseMergeExcludeColumns):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project(models={"+incremental_strategy": "merge"})


# dbt-spark's variant: merge (its default delete+insert does not exist on Spark), ids as bigint.
models__spark_incremental_predicates_sql = """
{{ config(
    materialized = 'incremental',
    unique_key = 'id'
) }}

{% if not is_incremental() %}

select cast(1 as bigint) as id, 'hello' as msg, 'blue' as color
union all
select cast(2 as bigint) as id, 'goodbye' as msg, 'red' as color

{% else %}

-- merge will not happen on the above record where id = 2, so new record will fall to insert
select cast(1 as bigint) as id, 'hey' as msg, 'blue' as color
union all
select cast(2 as bigint) as id, 'yo' as msg, 'green' as color
union all
select cast(3 as bigint) as id, 'anyway' as msg, 'purple' as color

{% endif %}
"""


class SparkIncrementalPredicates(BaseIncrementalPredicates):
    @pytest.fixture(scope="class")
    def models(self):
        return {"delete_insert_incremental_predicates.sql": models__spark_incremental_predicates_sql}


class TestIncrementalPredicatesMerge(SparkIncrementalPredicates):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project(
            models={
                "+incremental_predicates": ["dbt_internal_dest.id != 2"],
                "+incremental_strategy": "merge",
            }
        )


class TestPredicatesMerge(SparkIncrementalPredicates):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project(
            models={
                "+predicates": ["dbt_internal_dest.id != 2"],
                "+incremental_strategy": "merge",
            }
        )


class IncrementalOnSchemaChangeIgnoreFail(BaseIncrementalOnSchemaChangeSetup):
    """dbt-spark's split: ignore and fail apply to every strategy; Delta adds append_new_columns."""

    def test_run_incremental_ignore(self, project):
        self.run_twice_and_assert(
            "model_a incremental_ignore incremental_ignore_target",
            "incremental_ignore",
            "incremental_ignore_target",
            project,
        )

    def test_run_incremental_fail_on_schema_change(self, project):
        run_dbt(["run", "--models", "model_a incremental_fail", "--full-refresh"])
        results_two = run_dbt(["run", "--models", "model_a incremental_fail"], expect_pass=False)
        assert "Compilation Error" in results_two[1].message


class TestAppendOnSchemaChange(IncrementalOnSchemaChangeIgnoreFail):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project(models={"+incremental_strategy": "append"})


@pytest.mark.jvm_ci
class TestDeltaOnSchemaChange(IncrementalOnSchemaChangeIgnoreFail):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project(models={"+incremental_strategy": "merge", "+unique_key": "id"})

    @pytest.mark.xfail_profile(
        "embedded",
        reason="Sail lacks ALTER TABLE ADD COLUMNS ('unsupported ALTER TABLE operation'): "
        "on_schema_change=append_new_columns cannot run on the embedded engine",
    )
    def test_run_incremental_append_new_columns(self, project):
        # Delta cannot remove columns, so (as in dbt-spark) only adding them is expected to work.
        self.run_incremental_append_new_columns(project)

    def test_run_incremental_sync_all_columns(self, project):
        # Delta Lake cannot drop columns: dbt-spark raises a compilation error saying so.
        for model in ("incremental_sync_all_columns", "incremental_sync_remove_only"):
            select = f"model_a {model} {model}_target"
            run_dbt(["run", "--models", select, "--full-refresh"])
            results = run_dbt(["run", "--models", select], expect_pass=False)
            assert "Compilation Error" in results[1].message


_microbatch_model_sql = """
{{ config(materialized='incremental', incremental_strategy='microbatch', event_time='event_time',
          batch_size='day', begin=modules.datetime.datetime(2020, 1, 1, 0, 0, 0),
          partition_by=['date_day']) }}
select *, cast(event_time as date) as date_day
from {{ ref('input_model') }}
"""


@pytest.mark.xfail_profile(
    "embedded",
    reason="Sail lacks `SET key = value` in SQL (dbt-spark sets "
    "spark.sql.sources.partitionOverwriteMode = DYNAMIC) and INSERT OVERWRITE ... PARTITION (col) "
    "('PARTITION for write' is not implemented): dbt-spark's microbatch strategy, an insert_overwrite "
    "of each batch's partitions, cannot run on the embedded engine",
)
class TestMicrobatch(BaseMicrobatch):
    """dbt-spark's microbatch (insert_overwrite of the batch's partitions) on a Delta table."""

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def microbatch_model_sql(self) -> str:
        return _microbatch_model_sql
