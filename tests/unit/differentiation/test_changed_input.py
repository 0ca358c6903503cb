"""A GROUP BY over an inner join whose larger input did not change reads the touched groups off
the other input's change (changed_input.py): the larger input is read once, not twice. The
results are checked on the engines in tests/functional/differentiation/test_operators.py and
test_property.py."""

from __future__ import annotations

from typing import Dict, Optional

import pytest

from dbt.adapters.dyntable.differentiation import aggregate, differentiate, plan_query
from dbt.adapters.dyntable.differentiation.explain import SymbolicResolver, reads

PER_SITE_AND_DAY = """select d.site, r.day, count(*) as n, avg(r.reading) as mean
    from s.readings r {join} s.devices d on d.id = r.device group by d.site, r.day"""


class OneChanged(SymbolicResolver):
    """Only ``changed`` changed; ``sizes`` in bytes (a table left out: its size unknown)."""

    def __init__(self, changed: str, sizes: Dict[str, int]) -> None:
        self.changed, self.sizes = changed, sizes

    def is_unchanged(self, table: str) -> bool:
        return table != self.changed

    def size_bytes(self, table: str) -> Optional[int]:
        return self.sizes.get(table)


SIZES = {"s.readings": 15_000_000, "s.devices": 13_000}


def derived(resolver: OneChanged, sql: str = PER_SITE_AND_DAY.format(join="join")) -> tuple[str, set[str]]:
    delta = differentiate(plan_query(sql), resolver, stored="s.dt")
    return reads(delta.sql), set(delta.applied.values())


def test_a_changed_dimension_is_read_for_the_touched_groups_and_the_fact_once() -> None:
    shape, rules = derived(OneChanged("s.devices", SIZES))
    assert shape == "s.devices@changesx1 s.devices@v1x1 s.readings@v1x1"
    assert aggregate.STORED_NARROWED_RULE in rules


@pytest.mark.parametrize(
    ("resolver", "sql"),
    [
        # the fact changed: the dimension is the smaller input, ΔQ reads it cheaply
        (OneChanged("s.readings", SIZES), PER_SITE_AND_DAY.format(join="join")),
        # sizes unknown
        (OneChanged("s.devices", {}), PER_SITE_AND_DAY.format(join="join")),
        # an outer join's ΔQ holds rows whose dimension columns are NULL, not in the change
        (OneChanged("s.devices", SIZES), PER_SITE_AND_DAY.format(join="left join")),
        # no group key is a column of the dimension passed up unchanged
        (
            OneChanged("s.devices", SIZES),
            "select upper(d.site) as site, r.day, count(*) as n from s.readings r join s.devices d "
            "on d.id = r.device group by upper(d.site), r.day",
        ),
    ],
    ids=["fact-changed", "sizes-unknown", "left-join", "computed-key"],
)
def test_elsewhere_the_touched_groups_are_read_off_the_delta(resolver: OneChanged, sql: str) -> None:
    shape, rules = derived(resolver, sql)
    assert aggregate.STORED_NARROWED_RULE not in rules
    assert aggregate.STORED_RULE in rules
