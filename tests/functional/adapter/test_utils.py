"""dbt's cross-database macros (dbt-tests-adapter's utils suites), as dbt-spark runs them.

Plus the date-spine family (date, date_spine, generate_series, powers of two) and equals / null
compare. Not run: BaseGetIntervalsBetween, whose fixture feeds '09/01/2023' to Spark's date(),
which no Spark engine parses (dbt-spark does not run it either).
"""

import pytest
from dbt.tests.adapter.utils.fixture_listagg import models__test_listagg_yml
from dbt.tests.adapter.utils.test_any_value import BaseAnyValue
from dbt.tests.adapter.utils.test_bool_or import BaseBoolOr
from dbt.tests.adapter.utils.test_cast import BaseCast
from dbt.tests.adapter.utils.test_cast_bool_to_text import BaseCastBoolToText
from dbt.tests.adapter.utils.test_concat import BaseConcat
from dbt.tests.adapter.utils.test_date import BaseDate
from dbt.tests.adapter.utils.test_date_spine import BaseDateSpine
from dbt.tests.adapter.utils.test_date_trunc import BaseDateTrunc
from dbt.tests.adapter.utils.test_dateadd import BaseDateAdd
from dbt.tests.adapter.utils.test_datediff import BaseDateDiff
from dbt.tests.adapter.utils.test_equals import BaseEquals
from dbt.tests.adapter.utils.test_escape_single_quotes import BaseEscapeSingleQuotesBackslash
from dbt.tests.adapter.utils.test_except import BaseExcept
from dbt.tests.adapter.utils.test_generate_series import BaseGenerateSeries
from dbt.tests.adapter.utils.test_get_powers_of_two import BaseGetPowersOfTwo
from dbt.tests.adapter.utils.test_hash import BaseHash
from dbt.tests.adapter.utils.test_intersect import BaseIntersect
from dbt.tests.adapter.utils.test_last_day import BaseLastDay
from dbt.tests.adapter.utils.test_length import BaseLength
from dbt.tests.adapter.utils.test_listagg import BaseListagg
from dbt.tests.adapter.utils.test_null_compare import BaseMixedNullCompare, BaseNullCompare
from dbt.tests.adapter.utils.test_position import BasePosition
from dbt.tests.adapter.utils.test_replace import BaseReplace
from dbt.tests.adapter.utils.test_right import BaseRight
from dbt.tests.adapter.utils.test_safe_cast import BaseSafeCast
from dbt.tests.adapter.utils.test_split_part import BaseSplitPart
from dbt.tests.adapter.utils.test_string_literal import BaseStringLiteral

from tests.functional.adapter.delta import delta_project


class Delta:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()


class TestAnyValue(Delta, BaseAnyValue):
    pass


class TestBoolOr(Delta, BaseBoolOr):
    pass


class TestCast(Delta, BaseCast):
    pass


class TestCastBoolToText(Delta, BaseCastBoolToText):
    pass


class TestConcat(Delta, BaseConcat):
    pass


class TestDate(Delta, BaseDate):
    pass


class TestDateSpine(Delta, BaseDateSpine):
    pass


class TestDateTrunc(Delta, BaseDateTrunc):
    pass


class TestDateAdd(BaseDateAdd):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project(
            "test",
            seeds={
                "test": {"data_dateadd": {"+column_types": {"from_time": "timestamp", "result": "timestamp"}}}
            },
        )


@pytest.mark.jvm_ci
class TestDateDiff(Delta, BaseDateDiff):
    pass


class TestEquals(Delta, BaseEquals):
    pass


class TestEscapeSingleQuotes(Delta, BaseEscapeSingleQuotesBackslash):
    pass


class TestExcept(Delta, BaseExcept):
    pass


class TestGenerateSeries(Delta, BaseGenerateSeries):
    pass


class TestGetPowersOfTwo(Delta, BaseGetPowersOfTwo):
    pass


class TestHash(Delta, BaseHash):
    pass


class TestIntersect(Delta, BaseIntersect):
    pass


class TestLastDay(Delta, BaseLastDay):
    pass


class TestLength(Delta, BaseLength):
    pass


# Spark's listagg equivalent (collect_list + array_join) ignores `order by` and `limit`, so only
# the unordered forms are compared, as in dbt-spark's own tests.
models__test_listagg_no_order_by_sql = """
with data as (
    select * from {{ ref('data_listagg') }}
),
data_output as (
    select * from {{ ref('data_listagg_output') }}
),
calculate as (
    select
        group_col,
        {{ listagg('string_text', "', '") }} as actual,
        'comma_whitespace_unordered' as version
    from data
    where group_col = 3
    group by group_col
    union all
    select
        group_col,
        {{ listagg('DISTINCT string_text', "','") }} as actual,
        'distinct_comma' as version
    from data
    where group_col = 3
    group by group_col
    union all
    select
        group_col,
        {{ listagg('string_text') }} as actual,
        'no_params' as version
    from data
    where group_col = 3
    group by group_col
)
select
    calculate.actual,
    data_output.expected
from calculate
left join data_output
on calculate.group_col = data_output.group_col
and calculate.version = data_output.version
"""


class TestListagg(Delta, BaseListagg):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "test_listagg.yml": models__test_listagg_yml,
            "test_listagg.sql": self.interpolate_macro_namespace(
                models__test_listagg_no_order_by_sql, "listagg"
            ),
        }


class TestMixedNullCompare(Delta, BaseMixedNullCompare):
    pass


class TestNullCompare(Delta, BaseNullCompare):
    pass


class TestPosition(Delta, BasePosition):
    pass


class TestReplace(Delta, BaseReplace):
    pass


class TestRight(Delta, BaseRight):
    pass


class TestSafeCast(Delta, BaseSafeCast):
    pass


class TestSplitPart(Delta, BaseSplitPart):
    pass


class TestStringLiteral(Delta, BaseStringLiteral):
    pass
