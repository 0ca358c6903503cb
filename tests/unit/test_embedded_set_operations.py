"""Which types a later branch of a set operation may have on the embedded engine: Sail casts its
values to the first branch's type, so only a type whose values survive that cast is let through
(docs/ARCHITECTURE.md, "Engines")."""

from __future__ import annotations

import pytest
from pyspark.sql import types as t

from dbt.adapters.dyntable.engines.embedded_set_operations import _fits


@pytest.mark.parametrize(
    "later, first, fits",
    [
        (t.IntegerType(), t.LongType(), True),
        (t.LongType(), t.IntegerType(), True),  # an overflow fails Sail's cast loudly
        (t.LongType(), t.StringType(), True),
        (t.NullType(), t.DateType(), True),
        (t.IntegerType(), t.DoubleType(), True),
        (t.DecimalType(10, 2), t.DecimalType(12, 3), True),
        (t.DateType(), t.TimestampType(), True),
        (t.StringType(), t.LongType(), False),  # 'A7' would be NULL
        (t.StringType(), t.DateType(), False),
        (t.DoubleType(), t.LongType(), False),  # 2.5 would be 2
        (t.DecimalType(12, 3), t.DecimalType(10, 2), False),  # 2.125 would be 2.13
        (t.LongType(), t.DoubleType(), False),  # past 2**53 a bigint is rounded
        (t.StringType(), t.NullType(), False),
    ],
)
def test_a_later_branch_fits_the_first_only_where_its_values_survive(later, first, fits) -> None:
    assert _fits(later, first) is fits
