"""Seed cells reach the table as the values they are: NULLs, booleans, quotes and backslashes."""

import pytest
from dbt.tests.adapter.simple_seed.test_seed import BaseTestEmptySeed
from dbt.tests.util import run_dbt

from tests.functional.adapter.delta import delta_project

pytestmark = pytest.mark.jvm_ci

seed_csv = """id,label,flag,amount
1,plain,true,1.50
2,it's,false,
3,back\\slash,,2.25
4,,true,0
"""


class TestSeedValues:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def seeds(self):
        return {"values_seed.csv": seed_csv}

    def test_cells_load_as_written(self, project):
        results = run_dbt(["seed"])
        assert [r.status for r in results] == ["success"]
        rows = project.run_sql(
            f"select id, label, flag, amount from {project.test_schema}.values_seed order by id",
            fetch="all",
        )
        assert [tuple(row) for row in rows] == [
            (1, "plain", True, 1.5),
            (2, "it's", False, None),
            (3, "back\\slash", None, 2.25),
            (4, None, True, 0.0),
        ]


class TestEmptySeed(BaseTestEmptySeed):
    """A seed with a header and no rows (dbt-tests-adapter's suite, as dbt-spark runs it)."""

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project(seeds={"quote_columns": False})
