"""`dbt run --empty` and `dbt build --empty` (dbt-tests-adapter's empty suites).

Not run: dbt-tests-adapter's MetadataWithEmptyFlag, whose project does not even parse on dbt-spark
(its alter_relation_add_remove_columns model calls a macro that raises "Apache Spark does not
support dropping columns from tables" at compile time, on every Spark engine).
"""

import pytest
from dbt.tests.adapter.empty.test_empty import (
    BaseTestEmpty,
    BaseTestEmptyInlineSourceRef,
    BaseTestEmptySeedFlag,
)

from tests.functional.adapter.delta import delta_project

pytestmark = pytest.mark.jvm_ci

NO_SEED_EMPTY = (
    "dbt-core 1.11 (pinned) has no `dbt seed --empty`, and its `dbt build --empty` loads seeds in "
    "full; this dbt-tests-adapter suite targets a later dbt-core"
)


class TestEmptyFlag(BaseTestEmpty):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()


class TestEmptyFlagInlineSourceRef(BaseTestEmptyInlineSourceRef):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()


class TestEmptySeedFlag(BaseTestEmptySeedFlag):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.mark.skip(reason=NO_SEED_EMPTY)
    def test_seed_empty_creates_table_with_zero_rows(self, project):
        pass

    @pytest.mark.skip(reason=NO_SEED_EMPTY)
    def test_seed_empty_preserves_column_types(self, project):
        pass

    @pytest.mark.skip(reason=NO_SEED_EMPTY)
    def test_build_empty_with_seed(self, project):
        pass
