"""Names the embedded engine hands Sail: every schema, table and view in lower case, as the
warehouse stores them, whatever case a statement spells them in (docs/ARCHITECTURE.md, "Engines")."""

from __future__ import annotations

import pytest

from dbt.adapters.dyntable.engines.warehouse import canonical_names

KNOWN = {"analytics", "mydt", "orders", "rt"}


@pytest.mark.parametrize(
    "statement, canonical",
    [
        # dbt's spelling of a profile's schema and a model's alias
        ("select * from Analytics.MyDT", "select * from analytics.mydt"),
        ("SELECT count(*) AS n FROM `rt`.`MyDT` AS r", "SELECT count(*) AS n FROM `rt`.`mydt` AS r"),
        (
            "merge into Analytics.Orders as t using (select 1 as Id) s on t.Id = s.Id when matched then delete",
            "merge into analytics.orders as t using (select 1 as Id) s on t.Id = s.Id when matched then delete",
        ),
        # commands sqlglot does not parse: their known names go
        ("show table extended in Analytics like '*'", "show table extended in analytics like '*'"),
        ("SHOW TABLE EXTENDED IN `Analytics` LIKE 'MyDT'", "SHOW TABLE EXTENDED IN `analytics` LIKE 'MyDT'"),
        ("describe detail Analytics.MyDT", "describe detail analytics.mydt"),
        # a column, an alias, a literal, a comment and a CTE keep their spelling
        (
            "/* Orders */ with Orders as (select 'MyDT' as MyDT) select Orders.MyDT, o.Orders from Orders, rt.Orders o",
            "/* Orders */ with Orders as (select 'MyDT' as MyDT) select Orders.MyDT, o.Orders from Orders, rt.orders o",
        ),
        # paths, unknown names and lower-case statements are left alone
        ("select * from delta.`/w/Analytics/MyDT`", "select * from delta.`/w/Analytics/MyDT`"),
        ("select * from Other.Thing", "select * from Other.Thing"),
        ("select * from analytics.mydt", "select * from analytics.mydt"),
    ],
)
def test_names_of_the_catalog_are_lowered_and_nothing_else(statement: str, canonical: str) -> None:
    assert canonical_names(statement, KNOWN) == canonical
