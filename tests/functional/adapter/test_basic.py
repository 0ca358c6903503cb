"""dbt-tests-adapter's basic suites, configured as dbt-spark configures them, on Delta tables."""

import pytest
from dbt.tests.adapter.basic.test_adapter_methods import BaseAdapterMethod
from dbt.tests.adapter.basic.test_base import BaseSimpleMaterializations
from dbt.tests.adapter.basic.test_empty import BaseEmpty
from dbt.tests.adapter.basic.test_ephemeral import BaseEphemeral
from dbt.tests.adapter.basic.test_generic_tests import BaseGenericTests
from dbt.tests.adapter.basic.test_incremental import BaseIncremental
from dbt.tests.adapter.basic.test_singular_tests import BaseSingularTests
from dbt.tests.adapter.basic.test_singular_tests_ephemeral import BaseSingularTestsEphemeral
from dbt.tests.adapter.basic.test_snapshot_check_cols import BaseSnapshotCheckCols
from dbt.tests.adapter.basic.test_snapshot_timestamp import BaseSnapshotTimestamp
from dbt.tests.adapter.basic.test_validate_connection import BaseValidateConnection

from tests.functional.adapter.delta import delta_project


@pytest.mark.jvm_ci
class TestSimpleMaterializations(BaseSimpleMaterializations):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project("base")


class TestSingularTests(BaseSingularTests):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project("singular_tests")


class TestSingularTestsEphemeral(BaseSingularTestsEphemeral):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project("singular_tests_ephemeral")


class TestEmpty(BaseEmpty):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()


class TestEphemeral(BaseEphemeral):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project("ephemeral")


@pytest.mark.jvm_ci
class TestIncremental(BaseIncremental):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project("incremental")


class TestGenericTests(BaseGenericTests):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project("generic_tests")


class TestSnapshotCheckCols(BaseSnapshotCheckCols):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project("snapshot_strategy_check_cols")


@pytest.mark.jvm_ci
class TestSnapshotTimestamp(BaseSnapshotTimestamp):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project("snapshot_strategy_timestamp")


class TestAdapterMethod(BaseAdapterMethod):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project("adapter_methods")


class TestValidateConnection(BaseValidateConnection):
    pass
