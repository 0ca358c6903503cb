"""dbt show, unit tests, stored test failures and ephemeral error handling.

Not run, as dbt-spark does not run them either: the caching suites (they call .lower() on the
relation's database, which Spark relations do not have) and BaseEphemeralMulti/Nested (they compare
compiled SQL with Postgres' `create view "db"."schema"...` text).
"""

import pytest
from dbt.tests.adapter.dbt_show.test_dbt_show import (
    BaseShowDoesNotHandleDoubleLimit,
    BaseShowLimit,
    BaseShowSqlHeader,
)
from dbt.tests.adapter.ephemeral.test_ephemeral import BaseEphemeralErrorHandling
from dbt.tests.adapter.store_test_failures_tests.test_store_test_failures import (
    TEST_AUDIT_SCHEMA_SUFFIX,
    StoreTestFailuresBase,
)
from dbt.tests.adapter.unit_testing.test_case_insensitivity import BaseUnitTestCaseInsensivity
from dbt.tests.adapter.unit_testing.test_invalid_input import BaseUnitTestInvalidInput
from dbt.tests.adapter.unit_testing.test_types import BaseUnitTestingTypes

from tests.functional.adapter.delta import delta_project

pytestmark = pytest.mark.jvm_ci


class Delta:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()


class TestShowLimit(Delta, BaseShowLimit):
    pass


class TestShowSqlHeader(Delta, BaseShowSqlHeader):
    pass


@pytest.mark.skip_profile(
    "spark_session", reason="the expected text is Sail's; Spark's parser words this error differently"
)
class TestShowDoesNotHandleDoubleLimit(Delta, BaseShowDoesNotHandleDoubleLimit):
    DATABASE_ERROR_MESSAGE = "duplicated LIMIT clause"


class TestUnitTestingTypes(Delta, BaseUnitTestingTypes):
    @pytest.fixture
    def data_types(self):
        # sql_value, yaml_value: dbt-spark's list, its offset timestamp tested separately below
        return [
            ["1", "1"],
            ["2.0", "2.0"],
            ["'12345'", "12345"],
            ["'string'", "string"],
            ["true", "true"],
            ["date '2011-11-11'", "2011-11-11"],
            ["timestamp '2013-11-03 00:00:00'", "2013-11-03 00:00:00"],
        ]


@pytest.mark.xfail_profile(
    "embedded",
    reason="Sail cannot parse a UTC offset in a timestamp literal: timestamp "
    "'2013-11-03 00:00:00-0' fails with 'Invalid timezone \"-0\"' (dbt-spark's unit-test type list "
    "has this value)",
)
class TestUnitTestingTimestampWithOffset(Delta, BaseUnitTestingTypes):
    @pytest.fixture
    def data_types(self):
        return [["timestamp '2013-11-03 00:00:00-0'", "2013-11-03 00:00:00-0"]]


class TestUnitTestCaseInsensitivity(Delta, BaseUnitTestCaseInsensivity):
    pass


class TestUnitTestInvalidInput(Delta, BaseUnitTestInvalidInput):
    pass


class TestStoreTestFailuresWithDelta(StoreTestFailuresBase):
    """dbt-spark's Delta variant: failures stored as Delta tables in an audit schema."""

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project(
            seeds={"quote_columns": False, "test": self.column_type_overrides()},
            tests={
                "+schema": TEST_AUDIT_SCHEMA_SUFFIX,
                "+store_failures": True,
                "+file_format": "delta",
            },
        )

    def test_store_and_assert_failure_with_delta(self, project):
        self.run_tests_store_one_failure(project)
        self.run_tests_store_failures_and_assert(project)


class TestEphemeralErrorHandling(Delta, BaseEphemeralErrorHandling):
    pass
