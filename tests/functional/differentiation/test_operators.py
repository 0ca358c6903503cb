"""Every operator's derivative on the engine under test: state(v0) ⊎ Δ == Q(v1) as multisets."""

from __future__ import annotations

import pytest

from dbt.adapters.dyntable.differentiation import aggregate
from tests.functional.differentiation.harness import Warehouse


@pytest.mark.jvm_ci
def test_projection_and_filter_with_moves_in_and_out(wh: Warehouse) -> None:
    t = wh.table(
        "t",
        "id bigint, v string, d date",
        [
            "(1, 'apple', date'2024-01-01')",
            "(2, 'banana', date'2024-02-01')",
            "(2, 'banana', date'2024-02-01')",
            "(null, 'cherry', null)",
            "(5, null, date'2024-03-03')",
        ],
    )
    wh.check(
        f"""select id, upper(v) as uv, case when id > 1 then 'big' else 'small' end as size,
                   cast(id as double) as id_d, date_add(d, 1) as next_day, length(v) as len,
                   coalesce(v, 'none') as v2
            from {t}
            where (id is null or id in (1, 2, 3, 5)) and (v like '%an%' or v is null or id between 1 and 1)""",
        [
            f"insert into {t} values (3, 'mango', date'2024-04-04'), (2, 'banana', date'2024-02-01')",
            f"update {t} set v = 'pear' where id = 1",  # moves out of the filter
            f"update {t} set v = 'candy' where id is null",  # moves into it
            f"delete from {t} where id = 5",
        ],
    )


def _orders_customers(wh: Warehouse) -> tuple[str, str]:
    customers = wh.table(
        "customers",
        "id bigint, name string, country string",
        [
            "(1, 'ann', 'fr')",
            "(2, 'bob', 'de')",
            "(3, 'cy', null)",
            "(null, 'nobody', 'fr')",
        ],
    )
    orders = wh.table(
        "orders",
        "oid bigint, cid bigint, amount bigint",
        [
            "(10, 1, 100)",
            "(11, 1, 50)",
            "(12, 1, 50)",
            "(13, 2, 70)",
            "(14, null, 5)",
            "(15, 9, 1)",
            "(11, 1, 50)",
        ],
    )
    return orders, customers


def _join_dml(orders: str, customers: str) -> list[str]:
    return [
        f"delete from {customers} where id = 1",  # joined to many orders
        f"insert into {customers} values (9, 'zed', 'it'), (2, 'bob2', 'de')",  # duplicate key
        f"update {orders} set cid = 3 where oid = 13",
        f"insert into {orders} values (16, null, 7), (17, 3, 8)",
        f"delete from {orders} where oid = 14",
    ]


def test_inner_join(wh: Warehouse) -> None:
    orders, customers = _orders_customers(wh)
    wh.check(
        f"select o.oid, o.amount, c.name from {orders} o join {customers} c on o.cid = c.id",
        _join_dml(orders, customers),
    )


def test_left_join(wh: Warehouse) -> None:
    orders, customers = _orders_customers(wh)
    wh.check(
        f"select o.oid, c.name, c.country from {orders} o left join {customers} c on o.cid = c.id",
        _join_dml(orders, customers),
    )


def test_right_join(wh: Warehouse) -> None:
    orders, customers = _orders_customers(wh)
    wh.check(
        f"select o.oid, c.id, c.name from {orders} o right join {customers} c on o.cid = c.id",
        _join_dml(orders, customers),
    )


def test_full_outer_join(wh: Warehouse) -> None:
    orders, customers = _orders_customers(wh)
    wh.check(
        f"select o.oid, o.cid, c.id, c.name from {orders} o full outer join {customers} c on o.cid = c.id",
        _join_dml(orders, customers),
    )


@pytest.mark.jvm_ci
def test_full_outer_join_file_set_resolver(wh: Warehouse) -> None:
    orders, customers = _orders_customers(wh)
    wh.check(
        f"select o.oid, o.cid, c.id, c.name from {orders} o full outer join {customers} c on o.cid = c.id",
        _join_dml(orders, customers),
        resolver="file-sets",
    )


def test_full_outer_join_grouped_count_changes(wh: Warehouse) -> None:
    orders, customers = _orders_customers(wh)
    wh.check(
        f"select o.oid, o.cid, c.id, c.name from {orders} o full outer join {customers} c on o.cid = c.id",
        _join_dml(orders, customers),
        resolver="grouped-counts",
    )


def test_non_equi_left_join(wh: Warehouse) -> None:
    orders, customers = _orders_customers(wh)
    wh.check(
        f"""select o.oid, c.name from {orders} o
            left join {customers} c on o.cid >= c.id and o.amount > 40""",
        _join_dml(orders, customers),
    )


def test_several_joins_and_self_join(wh: Warehouse) -> None:
    orders, customers = _orders_customers(wh)
    wh.check(
        f"""select o.oid, c.name, o2.oid as other, c2.name as same_country
            from {orders} o
            join {customers} c on o.cid = c.id
            left join {orders} o2 on o2.cid = o.cid and o2.oid <> o.oid
            left join {customers} c2 on c2.country = c.country and c2.id <> c.id""",
        _join_dml(orders, customers),
    )


def test_inner_join_insert_only_specialisation(wh: Warehouse) -> None:
    orders, customers = _orders_customers(wh)
    outcome = wh.check(
        f"select o.oid, c.name from {orders} o join {customers} c on o.cid = c.id",
        [
            f"insert into {orders} values (20, 1, 1), (20, 1, 1)",
            f"insert into {customers} values (1, 'ann2', 'fr')",
        ],
        insert_only={orders, customers},
    )
    assert outcome.delta.insert_only
    assert all(weight > 0 for _, weight in outcome.delta_rows)


def test_semi_and_anti_joins(wh: Warehouse) -> None:
    orders, customers = _orders_customers(wh)
    dml = _join_dml(orders, customers)
    wh.check(f"select id, name from {customers} where id in (select cid from {orders})", dml)


def test_exists_correlated(wh: Warehouse) -> None:
    orders, customers = _orders_customers(wh)
    wh.check(
        f"""select c.id, c.name from {customers} c
            where exists (select 1 from {orders} o where o.cid = c.id and o.amount >= 50)""",
        _join_dml(orders, customers),
    )


def test_not_exists(wh: Warehouse) -> None:
    orders, customers = _orders_customers(wh)
    wh.check(
        f"""select c.id, c.name from {customers} c
            where not exists (select 1 from {orders} o where o.cid = c.id)""",
        _join_dml(orders, customers),
    )


@pytest.mark.jvm_ci
def test_not_in_with_nulls(wh: Warehouse) -> None:
    """NOT IN is three-valued: a NULL in the subquery empties the result; it comes back when
    the NULL row is deleted."""
    orders, customers = _orders_customers(wh)
    query = f"select id, name from {customers} where id not in (select cid from {orders} where amount < 60)"
    first = wh.check(query, [f"delete from {orders} where cid is null"])
    assert first.before == {} and first.after != {}
    wh.check(query, [f"insert into {orders} values (30, null, 1)"])
    wh.check(
        query, [f"delete from {orders} where cid is null", f"insert into {customers} values (null, 'x', 'y')"]
    )


def test_semi_join_insert_only_specialisation(wh: Warehouse) -> None:
    orders, customers = _orders_customers(wh)
    wh.check(
        f"select id, name from {customers} where id in (select cid from {orders})",
        [f"insert into {orders} values (40, 3, 1)", f"insert into {customers} values (3, 'cy2', 'x')"],
        insert_only={orders, customers},
    )
    wh.check(
        f"select id, name from {customers} c where not exists (select 1 from {orders} o where o.cid = c.id)",
        [f"insert into {orders} values (41, 9, 1), (42, 2, 1)"],
        insert_only={orders, customers},
    )


@pytest.mark.jvm_ci
def test_union_all_and_union(wh: Warehouse) -> None:
    orders, customers = _orders_customers(wh)
    dml = _join_dml(orders, customers)
    wh.check(
        f"""select cid as k, 'order' as src from {orders}
            union all select id as k, 'customer' as src from {customers}
            union all select 1 as k, 'constant' as src""",
        dml,
    )


def test_union_distinct(wh: Warehouse) -> None:
    orders, customers = _orders_customers(wh)
    wh.check(
        f"select cid as k from {orders} union select id as k from {customers}", _join_dml(orders, customers)
    )


@pytest.mark.jvm_ci
def test_group_by_aggregates(wh: Warehouse) -> None:
    orders, customers = _orders_customers(wh)
    outcome = wh.check(
        f"""select cid, count(*) as n, count(distinct amount) as amounts, sum(amount) as total,
                   avg(amount) as mean, min(amount) as lo, max(amount) as hi,
                   bool_and(amount > 10) as all_big, bool_or(amount > 90) as any_huge
            from {orders} group by cid""",
        [*_join_dml(orders, customers), f"update {orders} set cid = 2 where oid = 10"],
    )
    assert outcome.delta.row_key == ["cid"]


@pytest.mark.parametrize("resolver", ["except-all", pytest.param("file-sets", marks=pytest.mark.jvm_ci)])
def test_inserts_fold_into_the_stored_aggregate(wh: Warehouse, resolver: str) -> None:
    """Insert-only changes under count/sum/min/max read the DT's stored rows, not the sources:
    new groups, NULL keys and values, duplicate rows, a group whose sum stays NULL. The same
    change accumulated into the stored rows by one MERGE (whose partials never read them) gives
    the query's result too, under the DT's own column names and order and its decimal type."""
    t = wh.table(
        "t",
        "k string, x bigint, y double, z decimal(10, 2)",
        ["('a', 1, 1.5, 1.25)", "('a', null, null, null)", "(null, 2, null, 2.5)", "('n', null, 2.0, null)"],
    )
    sql = f"""select k, count(*) as n, count(x) as nx, sum(x) as sx, sum(y) as sy, sum(z) as sz,
                     min(x) as lo, max(y) as hi, min(z) as lz
              from {t} group by k"""
    dml = [
        f"insert into {t} values ('a', 5, 0.5, 0.75), ('a', 5, 0.5, 0.75), ('b', null, null, null), "
        "(null, 7, 1.0, 9.99), ('n', null, null, null)"
    ]
    outcome = wh.check(sql, dml, insert_only={t}, resolver=resolver, stored=True)
    assert "stored_" in outcome.delta.sql
    assert outcome.delta.accumulation is not None and "stored_" not in outcome.delta.accumulation.sql
    assert outcome.accumulated is not None
    renamed = wh.check(
        f"select hi as top, key, n from (select k as key, count(*) as n, max(x) as hi from {t} group by k) as g",
        [f"insert into {t} values ('a', 9, 1.0, 1.0), ('z', 1, 1.0, 1.0)"],
        insert_only={t},
        resolver=resolver,
        stored=True,
    )
    assert renamed.accumulated is not None
    assert renamed.delta.accumulation is not None and renamed.delta.accumulation.keys == ["key"]
    global_aggregate = wh.check(
        f"select count(*) as n, sum(x) as s, max(x) as m from {t}",
        [f"insert into {t} values ('c', 3, 3.0, 3.0)"],
        insert_only={t},
        resolver=resolver,
        stored=True,
    )
    assert global_aggregate.delta.accumulation is None  # no key to merge on: folded as a Z-set


GROUPED = """select k, count(*) as n, count(distinct x) as dx, sum(x) as sx, avg(y) as ay,
                    min(x) as lo, max(y) as hi, bool_or(x > 2) as big
             from {t} group by k"""


@pytest.mark.parametrize("resolver", ["except-all", "grouped-counts", "file-sets"])
def test_deletes_and_updates_read_the_old_groups_from_the_stored_rows(wh: Warehouse, resolver: str) -> None:
    """Deletes and updates under a stored GROUP BY delete the DT's rows of the touched groups and
    recompute those groups from the sources at v1 only: a group that vanishes, one that appears,
    the NULL group, a group whose aggregates do not change, one losing its minimum."""
    t = wh.table(
        "t",
        "k string, x bigint, y double",
        [
            "('a', 1, 1.5)",
            "('a', 2, 2.5)",
            "('a', 2, null)",
            "('b', 3, 0.5)",
            "(null, 4, 4.0)",
            "(null, null, 1.0)",
            "('u', 5, 5.0)",
            "('u', 5, 5.0)",
            "('v', 7, 7.0)",
        ],
    )
    outcome = wh.check(
        GROUPED.format(t=t),
        [
            f"delete from {t} where k = 'b'",  # vanishes
            f"delete from {t} where x = 1",  # 'a' loses its minimum
            f"update {t} set x = 9 where k is null and x = 4",  # the NULL group
            f"update {t} set k = 'c' where k = 'v'",  # 'v' vanishes, 'c' appears
            f"insert into {t} values ('u', 5, 5.0)",  # ...and delete one copy: 'u' is unchanged
            f"delete from {t} where k = 'u' and x = 5",
            f"insert into {t} values ('u', 5, 5.0), ('u', 5, 5.0), (null, 1, null)",
        ],
        resolver=resolver,
        stored=True,
    )
    assert "stored_" in outcome.delta.sql and outcome.delta.accumulation is None
    if resolver == "file-sets":
        assert not outcome.reads_before(t)
    assert not any(row[0] == "u" for row, _ in outcome.delta_rows)  # consolidated away


FOLDED = """select k, count(*) as n, count(x) as nx, sum(x) as sx, sum(z) as sz, min(x) as lo,
                   max(y) as hi from {t} group by k"""


def _folding_table(wh: Warehouse) -> str:
    return wh.table(
        "t",
        "k string, x bigint, y double, z decimal(10, 2)",
        [
            "('a', 1, 1.5, 1.25)",
            "('a', 3, 2.5, 0.5)",
            "('a', null, null, null)",
            "('b', 2, 0.5, 1.0)",
            "(null, 4, 4.0, 2.0)",
            "('c', 5, 5.0, 5.0)",
            "('c', 5, 5.0, 5.0)",
        ],
    )


@pytest.mark.parametrize("resolver", ["except-all", pytest.param("file-sets", marks=pytest.mark.jvm_ci)])
def test_a_checked_fold_folds_the_deletes_it_can_tell(wh: Warehouse, resolver: str) -> None:
    """Deletes and updates under a stored GROUP BY of count, exact sums, min and max fold into
    the stored groups where AUTO may recompute: a max deleted and replaced by a larger one, a
    min deleted above the stored one, groups emptied by count(*), a new group, the NULL group,
    a NULL value deleted, a decimal and an integer sum changed by updates."""
    t = _folding_table(wh)
    outcome = wh.check(
        FOLDED.format(t=t),
        [
            f"update {t} set y = 9.0, z = 0.25 where k = 'a' and x = 3",  # 'a': max replaced, min kept
            f"delete from {t} where k = 'a' and x is null",  # a NULL summand and extreme deleted
            f"delete from {t} where k = 'c'",  # count(*) falls to 0
            f"update {t} set x = 3, z = 2.5 where k is null",  # the NULL group's min falls
            f"delete from {t} where k = 'b'",
            f"insert into {t} values ('d', 7, 7.0, 7.0), ('b', 2, 0.5, 1.0)",  # new, and 'b' back
        ],
        resolver=resolver,
        stored=True,
        checked_fold=True,
    )
    assert aggregate.CHECKED_FOLD_RULE in outcome.delta.applied.values()
    assert any(row[0] == "c" and weight < 0 for row, weight in outcome.delta_rows)  # 'c' went away
    assert not any(row[0] == "b" for row, _ in outcome.delta_rows)  # consolidated away


#: Per site and day over a fact joined to its dimension: site_daily's shape (benchmarks/iot_project.py).
PER_SITE_AND_DAY = """select d.site, r.day, count(*) as n, sum(r.reading) as total, max(r.reading) as hi
    from {readings} r join {devices} d on d.id = r.device group by d.site, r.day"""


@pytest.mark.parametrize(
    ("changed", "stored"),
    [
        # the JVM suite's CI subset takes the path a refresh of a DT takes (the DT stores the groups)
        pytest.param("devices", True, marks=pytest.mark.jvm_ci),
        ("devices", False),
        ("readings", True),
        ("readings", False),
    ],
)
def test_group_by_over_a_join_reads_touched_groups_off_its_smaller_changed_input(
    wh: Warehouse, changed: str, stored: bool
) -> None:
    """Where only the dimension changed (a device moved site, one added without readings, one
    removed, a site set NULL), the groups to recompute are its sites' (changed_input.py): the
    fact is read at the end of the interval only, once, and the result is exact. Where the
    fact changed, the dimension is the smaller input: the touched groups come from ΔQ."""
    devices = wh.table("devices", "id bigint, site string", ["(1, 'a')", "(2, 'a')", "(3, 'b')", "(4, null)"])
    readings = wh.table("readings", "device bigint, day date, reading bigint", [])
    wh.engine.execute(
        f"insert into {readings} select id % 6, date_add(date'2024-01-01', cast(id % 5 as int)), id "
        "from range(400)"
    )
    dml = {
        "devices": [
            f"update {devices} set site = 'b' where id = 2",
            f"insert into {devices} values (9, 'c')",
            f"delete from {devices} where id = 3",
            f"update {devices} set site = null where id = 1",
        ],
        "readings": [
            f"delete from {readings} where reading < 20",
            f"insert into {readings} values (1, date'2024-01-09', 7)",
        ],
    }[changed]
    outcome = wh.check(
        PER_SITE_AND_DAY.format(readings=readings, devices=devices), dml, resolver="file-sets", stored=stored
    )
    narrowed = aggregate.STORED_NARROWED_RULE if stored else aggregate.NARROWED_RULE
    assert (narrowed in outcome.delta.applied.values()) == (changed == "devices")
    if changed == "devices":
        # the old groups from the DT, else the fact as it was; the new from the fact as it is
        assert outcome.reads(readings) == (1 if stored else 2)


@pytest.mark.parametrize(
    ("sql", "dml"),
    [
        # the max deleted, none as large inserted: the stored row cannot tell the next largest
        (FOLDED, "delete from {t} where k = 'a' and x = 3"),
        # no count(*): a group that gained no row may have emptied
        ("select k, sum(x) as sx, max(y) as hi from {t} group by k", "delete from {t} where k = 'b'"),
        # a double's sum under a delete would drift
        ("select k, count(*) as n, sum(y) as sy from {t} group by k", "update {t} set y = 2.0 where x = 1"),
        # the last non-null summand deleted: the sum becomes NULL, which the stored row cannot tell
        (
            "select k, count(*) as n, sum(x) as sx from {t} group by k",
            "delete from {t} where k = 'a' and x > 0",
        ),
    ],
)
def test_a_checked_fold_fails_where_the_stored_row_cannot_tell(wh: Warehouse, sql: str, dml: str) -> None:
    """A group whose new value the stored row and the change do not tell fails the query (the
    refresh then recomputes the DT: lifecycle/test_folded_groups.py); without the check the same change
    recomputes the touched groups from the source."""
    t = _folding_table(wh)
    with pytest.raises(Exception, match=aggregate.UNFOLDABLE):
        wh.check(sql.format(t=t), [dml.format(t=t)], stored=True, checked_fold=True)
    unchecked = _folding_table(wh.__class__(wh.engine))
    wh.check(sql.format(t=unchecked), [dml.format(t=unchecked)], stored=True)


def test_global_aggregate_reads_its_one_stored_row(wh: Warehouse) -> None:
    """Deletes emptying the input of a stored global aggregate: -DT + γ(Q|I1), one row each."""
    t = wh.table("t", "x bigint, y double", ["(1, 1.5)", "(2, null)", "(2, 3.0)"])
    sql = f"""select count(*) as n, count(distinct x) as dx, sum(x) as sx, avg(y) as ay, min(x) as lo,
                     max(y) as hi, bool_or(x > 1) as big from {t}"""
    outcome = wh.check(
        sql,
        [f"delete from {t} where x = 1", f"delete from {t} where x = 2"],
        resolver="file-sets",
        stored=True,
    )
    assert outcome.after == {(0, 0, None, None, None, None, None): 1}
    assert "stored_" in outcome.delta.sql and not outcome.reads_before(t)
    wh.check(sql, [f"insert into {t} values (5, 5.0)", f"update {t} set x = 6 where x = 5"], stored=True)
    without = wh.check(sql, [f"delete from {t} where x = 6"], resolver="file-sets")
    assert without.reads_before(t)  # without the DT's rows, Q|I0 is recomputed


def test_inserts_under_other_aggregates_read_the_stored_rows_too(wh: Warehouse) -> None:
    """count(distinct) cannot fold an insert, but the old groups still come from the DT."""
    t = wh.table("t", "k string, x bigint", ["('a', 1)", "('a', 2)", "('b', 3)"])
    outcome = wh.check(
        f"select k, count(distinct x) as d from {t} group by k",
        [f"insert into {t} values ('a', 1), ('c', 1)"],
        insert_only={t},
        resolver="grouped-counts",
        stored=True,
    )
    assert "stored_" in outcome.delta.sql


def test_group_by_expression_and_having(wh: Warehouse) -> None:
    orders, customers = _orders_customers(wh)
    wh.check(
        f"""select c.country, count(*) as n, sum(o.amount) as total
            from {orders} o join {customers} c on o.cid = c.id
            group by c.country having sum(o.amount) > 60""",
        _join_dml(orders, customers),
    )
    wh.check(
        f"select amount % 2 as parity, count(*) as n from {orders} group by 1 having n > 1",
        [f"insert into {orders} values (50, 1, 3), (51, 1, 5)", f"delete from {orders} where amount = 70"],
    )


def test_global_aggregates_over_empty_input(wh: Warehouse) -> None:
    t = wh.table("t", "id bigint, v bigint")
    outcome = wh.check(
        f"select count(*) as n, sum(v) as s, max(v) as m from {t}",
        [f"insert into {t} values (1, 10), (2, null)"],
    )
    assert outcome.before == {(0, None, None): 1}
    wh.check(f"select count(*) as n, sum(v) as s, max(v) as m from {t}", [f"delete from {t} where id >= 1"])


@pytest.mark.jvm_ci
def test_distinct(wh: Warehouse) -> None:
    orders, customers = _orders_customers(wh)
    wh.check(
        f"select distinct cid, amount from {orders}",
        [
            *_join_dml(orders, customers),
            f"delete from {orders} where oid = 11",
            f"insert into {orders} values (60, null, 5)",
        ],
    )


def test_distinct_insert_only(wh: Warehouse) -> None:
    orders, _ = _orders_customers(wh)
    outcome = wh.check(
        f"select distinct cid from {orders}",
        [f"insert into {orders} values (61, 1, 1), (62, 77, 1), (63, 77, 2), (64, null, 3)"],
        insert_only={orders},
    )
    assert outcome.delta.insert_only


@pytest.mark.jvm_ci
def test_windows_recompute_touched_partitions(wh: Warehouse) -> None:
    orders, customers = _orders_customers(wh)
    wh.check(
        f"""select oid, cid, amount,
                   row_number() over (partition by cid order by amount, oid) as rn,
                   rank() over (partition by cid order by amount) as rk,
                   dense_rank() over (partition by cid order by amount) as drk,
                   sum(amount) over (partition by cid) as cid_total,
                   count(*) over (partition by cid) as cid_count,
                   avg(amount) over (partition by cid) as cid_mean,
                   lag(amount) over (partition by cid order by amount, oid) as prev,
                   lead(oid, 1) over (partition by cid order by amount, oid) as next_oid,
                   first(amount) over (partition by cid order by amount, oid
                                       rows between unbounded preceding and unbounded following) as lo,
                   last(amount) over (partition by cid order by amount, oid
                                      rows between unbounded preceding and unbounded following) as hi
            from (select distinct oid, cid, amount from {orders}) d""",
        _join_dml(orders, customers),
    )


@pytest.mark.parametrize("resolver", ["except-all", "file-sets"])
def test_window_reads_the_old_partitions_from_the_stored_rows(wh: Warehouse, resolver: str) -> None:
    """A DT storing a window's rows: -(DT ⋉p ΔQ) + ξp(Q|I1 ⋉p ΔQ), the partition expression
    evaluated on the stored rows. Deletes and updates within and across partitions, the NULL
    partition, one that vanishes, one that appears, duplicate rows, a partition left unchanged."""
    t = wh.table(
        "t",
        "k string, v bigint, y double",
        [
            "('a', 1, 0.1)",
            "('a', 2, 0.2)",
            "('a', 2, 0.2)",
            "('b', 3, 0.3)",
            "(null, 4, 0.4)",
            "(null, 5, null)",
            "('c', 6, 0.6)",
            "('d', 7, 0.7)",
        ],
    )
    outcome = wh.check(
        f"""select k, v, y, sum(y) over (partition by coalesce(k, 'z')) as sy,
                   count(*) over (partition by coalesce(k, 'z')) as n,
                   row_number() over (partition by coalesce(k, 'z') order by v, y) as rn,
                   lag(v) over (partition by coalesce(k, 'z') order by v, y) as prev
            from {t}""",
        [
            f"delete from {t} where k = 'a' and v = 1",
            f"delete from {t} where k = 'b'",  # vanishes
            f"update {t} set k = 'a' where v = 5",  # from the NULL partition into a
            f"update {t} set y = 0.65 where k = 'c'",
            f"update {t} set k = 'e' where k = 'd'",  # d vanishes, e appears
            f"insert into {t} values ('z', 8, 0.8)",  # joins the NULL partition: coalesce(k, 'z')
        ],
        resolver=resolver,
        stored=True,
    )
    assert "stored_" in outcome.delta.sql and outcome.delta.accumulation is None
    if resolver == "file-sets":
        assert not outcome.reads_before(t)


def test_top_one_per_partition(wh: Warehouse) -> None:
    orders, customers = _orders_customers(wh)
    wh.check(
        f"""select oid, cid, amount from (
              select oid, cid, amount,
                     row_number() over (partition by cid order by amount desc, oid) as rn
              from {orders}) ranked
            where rn = 1""",
        [*_join_dml(orders, customers), f"update {orders} set amount = 500 where oid = 12"],
    )


#: (the DT's ``rn`` column, the window's input): the table itself, with and without ``rn``
#: stored, and a staging view's shape, a derived column the DT does not store.
_FIRST_ROW_SHAPES = [
    ("", "{t}"),
    (", rn", "{t}"),
    ("", "(select k, v, s, concat(s, '!') as tagged from {t} where s <> 'never') staged"),
]


@pytest.mark.parametrize("resolver", ["except-all", "file-sets"])
def test_inserts_fold_into_the_stored_first_rows(wh: Warehouse, resolver: str) -> None:
    """Insert-only changes under ``row_number() ... = 1`` read the DT's stored first rows, not the
    sources: a new partition, an insert that takes the lead, one that does not, a tie broken by
    the second ORDER BY key, a NULL partition, duplicate inserted rows; with and without ``rn``
    among the DT's columns, and over a staging subquery whose derived column the DT drops."""
    t = wh.table(
        "t",
        "k string, v bigint, s string",
        ["('a', 5, 'x')", "('a', 7, 'y')", "('b', 3, 'z')", "(null, 4, 'n')"],
    )
    dml = [
        f"insert into {t} values ('a', 1, 'w'), ('b', 9, 'q'), ('b', 3, 'a'), ('c', 2, 'c'), "
        "('c', 2, 'c'), (null, 1, 'm'), ('d', null, 'd')"
    ]
    for rn, staged in _FIRST_ROW_SHAPES:
        sql = f"""select k, v, s{rn} from (
                    select k, v, s, row_number() over (partition by k order by v, s) as rn
                    from {staged.format(t=t)}) r
                  where rn = 1"""
        outcome = wh.check(sql, dml, insert_only={t}, resolver=resolver, stored=True)
        assert "stored_" in outcome.delta.sql
        # the sources before the change are never read (v0_: the version-diff resolvers' name)
        assert "v0_" not in outcome.delta.sql and not outcome.reads_before(t)


@pytest.mark.parametrize("resolver", ["except-all", "grouped-counts", "file-sets"])
def test_deletes_and_updates_read_the_old_first_rows_from_the_stored_rows(
    wh: Warehouse, resolver: str
) -> None:
    """Deletes of a partition's first row (the runner-up takes over, or the partition vanishes)
    and updates moving rows between partitions (taking the lead of the new one, or not): the old
    first rows come from the DT, the new ones from the sources at v1; with and without ``rn``
    among the DT's columns, and over a staging subquery whose derived column the DT drops."""
    for shape, (rn, staged) in enumerate(_FIRST_ROW_SHAPES):
        t = wh.table(
            f"t{shape}",
            "k string, v bigint, s string",
            [
                "('a', 1, 'x')",
                "('a', 2, 'y')",
                "('a', 3, 'z')",
                "('b', 5, 'p')",
                "('c', 4, 'q')",
                "(null, 6, 'n')",
                "(null, 7, 'm')",
                "('d', 8, 'r')",
                "('d', 9, 's')",
            ],
        )
        sql = f"""select k, v, s{rn} from (
                    select k, v, s, row_number() over (partition by k order by v, s) as rn
                    from {staged.format(t=t)}) r
                  where rn = 1"""
        outcome = wh.check(
            sql,
            [
                f"delete from {t} where k = 'a' and v = 1",  # a's first row: the runner-up leads
                f"delete from {t} where k = 'b'",  # partition b vanishes
                f"update {t} set k = 'c' where k = 'd' and v = 8",  # d's first row moves behind c's
                f"update {t} set k = null where v = 2",  # a's new first row leads the NULL partition
                f"update {t} set k = 'e' where s = 'q'",  # c's first row moves to a new partition e
            ],
            resolver=resolver,
            stored=True,
        )
        assert "stored_" in outcome.delta.sql
        if resolver == "file-sets":
            assert not outcome.reads_before(t)


def test_rank_recomputes_first_rows_even_with_stored_rows(wh: Warehouse) -> None:
    t = wh.table("t", "k string, v bigint", ["('a', 1)", "('a', 2)", "('b', 3)"])
    ranked = f"select k, v from (select k, v, rank() over (partition by k order by v) as rn from {t}) r where rn = 1"
    outcome = wh.check(ranked, [f"insert into {t} values ('a', 0), ('a', 0)"], insert_only={t}, stored=True)
    assert "stored_" not in outcome.delta.sql


def test_ctes_subqueries_and_nested_views(wh: Warehouse) -> None:
    orders, customers = _orders_customers(wh)
    big = wh.view("big_orders", f"select oid, cid, amount from {orders} where amount >= 50")
    named = wh.view(
        "named_orders", f"select b.oid, b.amount, c.name from {big} b join {customers} c on b.cid = c.id"
    )
    views = {
        big: f"select oid, cid, amount from {orders} where amount >= 50",
        named: f"select b.oid, b.amount, c.name from {big} b join {customers} c on b.cid = c.id",
    }
    wh.check(
        f"""with per_name as (select name, sum(amount) as total from {named} group by name),
                 ranked as (select name, total from per_name where total > 0)
            select r.name, r.total, x.n from ranked r
            join (select name, count(*) as n from {named} group by name) x on x.name = r.name""",
        _join_dml(orders, customers),
        views=views,
    )


def test_declared_unique_keys_propagate(wh: Warehouse) -> None:
    orders, customers = _orders_customers(wh)
    outcome = wh.check(
        f"select o.oid, c.id as customer, o.amount * 2 as doubled from {orders} o join {customers} c on o.cid = c.id",
        [f"update {orders} set amount = 1 where oid = 10"],
        unique_keys={orders: ["oid"], customers: ["id"]},
    )
    assert outcome.delta.row_key == ["oid", "customer"]


def test_unchanged_sources_give_an_empty_typed_delta(wh: Warehouse) -> None:
    orders, customers = _orders_customers(wh)
    outcome = wh.check(f"select o.oid, c.name from {orders} o join {customers} c on o.cid = c.id", [])
    assert outcome.delta_rows == []


def test_struct_and_array_access(wh: Warehouse) -> None:
    t = wh.table(
        "nested",
        "id bigint, st struct<a: bigint, b: string>, arr array<bigint>",
        [
            "(1, named_struct('a', 1, 'b', 'x'), array(1, 2, 3))",
            "(2, named_struct('a', 2, 'b', null), array())",
            "(3, null, null)",
        ],
    )
    wh.check(
        f"""select id, st.a as a, upper(st.b) as b, arr[0] as first, arr[1] as second,
                   size(arr) as n, abs(id - 2) * 3 % 4 as m, round(id / 3, 2) as r
            from {t} where st.a is not null or arr is null""",
        [
            f"insert into {t} values (4, named_struct('a', 4, 'b', 'y'), array(7))",
            f"update {t} set st = named_struct('a', 9, 'b', 'z') where id = 3",
            f"delete from {t} where id = 1",
        ],
    )


def test_star_and_using_with_a_schema(wh: Warehouse) -> None:
    orders, customers = _orders_customers(wh)
    # The harness plans without a schema, so this test plans and checks on its own.
    from dbt.adapters.dyntable.differentiation import VersionDiffResolver, differentiate, plan_query

    sql = f"select * from {orders} o join (select id as cid, name from {customers}) c using (cid)"
    plan = plan_query(sql, schema={orders: ["oid", "cid", "amount"]})
    assert plan.columns == ["cid", "oid", "amount", "name"]  # Spark lists USING columns first
    start = {t: wh.version(t) for t in plan.sources}
    before = wh.rows(sql)
    for statement in _join_dml(orders, customers):
        wh.engine.execute(statement)
    after = wh.rows(sql)
    delta = differentiate(plan, VersionDiffResolver({t: (start[t], wh.version(t)) for t in plan.sources}))
    applied = before.copy()
    for row in wh.engine.execute(delta.sql).collect():
        applied[tuple(row[:-1])] += row[-1]
    assert +applied == after


def test_left_join_from_empty_tables(wh: Warehouse) -> None:
    left = wh.table("l", "k bigint, v string")
    right = wh.table("r", "k bigint, w string")
    wh.check(
        f"select l.k, l.v, r.w from {left} l left join {right} r on l.k = r.k",
        [
            f"insert into {left} values (1, 'a'), (1, 'a'), (null, 'n')",
            f"insert into {right} values (1, 'x'), (1, 'y')",
        ],
    )


def test_row_counts_constants_and_having_without_group_by(wh: Warehouse) -> None:
    orders, customers = _orders_customers(wh)
    dml = _join_dml(orders, customers)
    wh.check(f"select count(*) as n from {orders}", dml[:2])
    wh.check(f"select 1 as one, 'x' as tag from {orders} o join {customers} c on o.cid = c.id", dml)
    wh.check(f"select count(*) as n from {customers} having count(*) > 4", dml)


def test_correlated_in_and_windows_over_aggregates(wh: Warehouse) -> None:
    orders, customers = _orders_customers(wh)
    dml = _join_dml(orders, customers)
    wh.check(
        f"""select c.id, c.name from {customers} c
            where c.id in (select o.cid from {orders} o where o.amount > 10 and o.oid > c.id)""",
        dml,
    )
    wh.check(
        f"""select c.country, o.cid, sum(o.amount) as total,
                   rank() over (partition by c.country order by sum(o.amount) desc) as place
            from {orders} o join {customers} c on o.cid = c.id
            group by c.country, o.cid""",
        dml,
    )


@pytest.mark.jvm_ci
def test_intersect_and_except(wh: Warehouse) -> None:
    orders, customers = _orders_customers(wh)
    dml = [*_join_dml(orders, customers), f"insert into {customers} values (null, 'again', 'fr')"]
    wh.check(f"select cid from {orders} intersect select id from {customers}", dml)
    wh.check(f"select cid from {orders} except select id as cid from {customers}", dml)


OUTER_JOINS = ["left join", "right join", "full outer join"]


def _padded_pair(wh: Warehouse, right_rows: list[str]) -> tuple[str, str]:
    """A left table with duplicate rows and NULL keys, and a right table with ``right_rows``."""
    left = wh.table(
        "l",
        "k bigint, v string",
        [
            "(1, 'a')",
            "(1, 'a')",
            "(1, 'a')",
            "(2, 'b')",
            "(null, 'n')",
            "(null, 'n')",
            "(3, 'c')",
        ],
    )
    return left, wh.table("r", "k bigint, w string", right_rows)


def _outer_join(left: str, right: str, kind: str, condition: str) -> str:
    return f"select l.k, l.v, r.k as rk, r.w from {left} l {kind} {right} r on {condition}"


@pytest.mark.parametrize("resolver", ["except-all", "file-sets"])
@pytest.mark.parametrize("kind", OUTER_JOINS)
def test_outer_join_last_partner_of_duplicates_deleted(wh: Warehouse, kind: str, resolver: str) -> None:
    left, right = _padded_pair(wh, ["(1, 'x')", "(2, 'y')", "(2, 'y')", "(4, 'z')", "(4, 'z')"])
    wh.check(
        _outer_join(left, right, kind, "l.k = r.k"),
        [
            f"delete from {right} where k = 1",  # the only partner of three equal left rows
            f"delete from {right} where k = 2",  # two equal partners become one: no flip
            f"insert into {right} values (2, 'y')",
            f"delete from {left} where k = 3",
            f"insert into {left} values (4, 'd')",  # the padded right rows (4, 'z') find a partner
        ],
        resolver=resolver,
    )


@pytest.mark.parametrize("condition", ["l.k = r.k", "l.k <=> r.k"])
@pytest.mark.parametrize("kind", OUTER_JOINS)
def test_outer_join_insert_partners_previously_padded_rows(wh: Warehouse, kind: str, condition: str) -> None:
    left, right = _padded_pair(wh, ["(2, 'y')"])
    wh.check(
        _outer_join(left, right, kind, condition),
        [
            f"insert into {right} values (3, 'p'), (3, 'p'), (null, 'q'), (5, 'u')",
            f"insert into {left} values (null, 'm'), (5, 'e')",  # (5, 'u') is partnered only by ΔL
        ],
    )


@pytest.mark.parametrize("kind", OUTER_JOINS)
def test_outer_join_insert_only_specialisation(wh: Warehouse, kind: str) -> None:
    left, right = _padded_pair(wh, ["(2, 'y')"])
    wh.check(
        _outer_join(left, right, kind, "l.k = r.k"),
        [
            f"insert into {right} values (1, 'x'), (3, 'p'), (null, 'q'), (6, 'v')",
            f"insert into {left} values (2, 'b'), (6, 'f')",
        ],
        insert_only={left, right},
    )


@pytest.mark.parametrize("kind", OUTER_JOINS)
def test_outer_join_update_moves_a_right_join_key(wh: Warehouse, kind: str) -> None:
    left, right = _padded_pair(wh, ["(1, 'x')", "(2, 'y')", "(2, 'y')"])
    wh.check(
        _outer_join(left, right, kind, "l.k = r.k"),
        [f"update {right} set k = 3 where k = 1", f"update {right} set k = null where w = 'y'"],
        resolver="grouped-counts",
    )


@pytest.mark.parametrize("kind", OUTER_JOINS)
def test_outer_join_non_equi(wh: Warehouse, kind: str) -> None:
    left, right = _padded_pair(wh, ["(1, 'x')", "(2, 'y')", "(3, 'c')"])
    wh.check(
        _outer_join(left, right, kind, "l.k < r.k and l.v <> r.w"),
        [
            f"delete from {right} where k = 2",
            f"update {right} set w = 'a' where k = 3",  # (1, 'a') keeps no partner but (2, 'b')
            f"insert into {left} values (0, 'x'), (2, 'b')",
            f"delete from {left} where k = 1",
        ],
    )


@pytest.mark.parametrize("kind", OUTER_JOINS)
def test_outer_join_on_true(wh: Warehouse, kind: str) -> None:
    left, right = _padded_pair(wh, ["(1, 'x')", "(1, 'x')"])
    query = _outer_join(left, right, kind, "true")
    wh.check(query, [f"delete from {right} where k = 1"])  # every left row loses both partners
    wh.check(query, [f"insert into {right} values (9, 'n')", f"delete from {left} where k is null"])
    wh.check(query, [f"delete from {left} where true"])
