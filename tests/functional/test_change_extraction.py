"""Change extraction on the embedded engine: the change views equal the true row delta.

Ground truth for an interval (v0, v1] is ``v1 EXCEPT ALL v0`` (+1) and ``v0 EXCEPT ALL v1`` (-1),
evaluated by the engine with ``VERSION AS OF``; a change view must equal it as a multiset after
consolidation, whatever DML produced the versions.
"""

from __future__ import annotations

import itertools
import os
import random
import uuid
from collections import Counter
from pathlib import Path
from typing import Dict, Iterator, Tuple

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from dbt.adapters.dyntable.changes import (
    VersionedRelations,
    WEIGHT,
    ChangeDataFeedUnavailable,
    FileSetResolver,
    UndifferentiableSource,
    register_changes,
    register_changes_from_cdf,
)
from dbt.adapters.dyntable.delta_log import DeltaLog, IntervalKind
from dbt.adapters.dyntable.engines.base import Capabilities, Engine, EngineError
from dbt.adapters.dyntable.engines.embedded import EmbeddedEngine

SCHEMA = "chx"
SPARK_JARS_ENV = "DYNTABLE_SPARK_JARS"
Row = Tuple[object, ...]


@pytest.fixture(scope="module")
def engine(embedded_engine: EmbeddedEngine) -> Iterator[EmbeddedEngine]:
    embedded_engine.execute(f"create schema if not exists {SCHEMA}")
    yield embedded_engine
    embedded_engine.execute(f"drop schema if exists {SCHEMA} cascade")


def new_table(engine: EmbeddedEngine, columns: str, extra: str = "") -> Tuple[str, DeltaLog]:
    name = f"t_{uuid.uuid4().hex[:8]}"
    engine.execute(f"create table {SCHEMA}.{name} ({columns}) using delta {extra}")
    return f"{SCHEMA}.{name}", DeltaLog(engine.warehouse.table_location(SCHEMA, name))


def truth(engine: Engine, table: str, v0: int, v1: int) -> Dict[Row, int]:
    before = engine.spark.sql(f"select * from {table} version as of {v0}")
    after = engine.spark.sql(f"select * from {table} version as of {v1}")
    delta: Counter = Counter()
    for row in after.exceptAll(before).collect():
        delta[tuple(row)] += 1
    for row in before.exceptAll(after).collect():
        delta[tuple(row)] -= 1
    return {row: n for row, n in delta.items() if n}


def view_rows(engine: Engine, view: str) -> Counter:
    """(row, weight) multiset of a change view."""
    return Counter((tuple(r)[:-1], r[WEIGHT]) for r in engine.spark.sql(f"select * from {view}").collect())


def net(rows: Counter) -> Dict[Row, int]:
    total: Counter = Counter()
    for (row, weight), count in rows.items():
        total[row] += weight * count
    return {row: n for row, n in total.items() if n}


def check_interval(
    engine: Engine, table: str, log: DeltaLog, v0: int, v1: int, *, from_feed: bool = False
) -> Counter:
    name = f"changes_{uuid.uuid4().hex[:8]}"
    if from_feed:
        view = register_changes_from_cdf(engine.spark, engine.capabilities, log, v0, v1, name)
    else:
        view = register_changes(engine.spark, log, v0, v1, name)
    try:
        columns = engine.spark.table(table).columns
        assert engine.spark.table(view).columns == columns + [WEIGHT]
        rows = view_rows(engine, view)
        assert {w for _, w in rows} <= {1, -1}
        assert net(rows) == truth(engine, table, v0, v1), f"interval ({v0}, {v1}]"
        return rows
    finally:
        engine.spark.catalog.dropTempView(view)


def test_inserts_are_added_only(engine: EmbeddedEngine) -> None:
    table, log = new_table(engine, "id int, v string")
    engine.execute(f"insert into {table} values (1, 'a'), (2, 'b')")
    engine.execute(f"insert into {table} values (3, 'c'), (3, 'c')")  # duplicates are real rows
    assert log.interval(0, 2).kind is IntervalKind.ADDED_ONLY
    rows = check_interval(engine, table, log, 0, 2)
    assert rows == Counter({((1, "a"), 1): 1, ((2, "b"), 1): 1, ((3, "c"), 1): 2})


def test_update_is_minimized(engine: EmbeddedEngine) -> None:
    table, log = new_table(engine, "id int, v string")
    engine.execute(f"insert into {table} values (1, 'a'), (2, 'b'), (3, 'c')")
    engine.execute(f"update {table} set v = 'z' where id = 2")
    assert log.interval(1, 2).kind is IntervalKind.MIXED
    # The rewrite copied rows 1 and 3; minimisation cancels them so only the real change is left.
    assert check_interval(engine, table, log, 1, 2) == Counter({((2, "b"), -1): 1, ((2, "z"), 1): 1})
    redundant = register_changes(engine.spark, log, 1, 2, "changes_redundant", minimize=False)
    assert sum(view_rows(engine, redundant).values()) == 6
    assert net(view_rows(engine, redundant)) == truth(engine, table, 1, 2)
    engine.spark.catalog.dropTempView(redundant)


def test_delete_of_whole_files_is_removed_only(engine: EmbeddedEngine) -> None:
    table, log = new_table(engine, "id int, v string")
    engine.execute(f"insert into {table} values (1, 'a'), (2, 'b')")
    engine.execute(f"insert into {table} values (3, 'c')")
    engine.execute(f"delete from {table} where id = 3")
    assert log.interval(2, 3).kind is IntervalKind.REMOVED_ONLY
    assert check_interval(engine, table, log, 2, 3) == Counter({((3, "c"), -1): 1})
    engine.execute(f"delete from {table} where id = 1")  # a partial delete rewrites the file
    assert log.interval(3, 4).kind is IntervalKind.MIXED
    check_interval(engine, table, log, 3, 4)


def test_every_interval_of_a_mixed_history(engine: EmbeddedEngine) -> None:
    table, log = new_table(engine, "id int, v string, amount double")
    engine.execute(f"insert into {table} values (1, 'a', 1.0), (2, 'b', 2.0), (3, 'c', 3.0)")
    engine.execute(f"insert into {table} values (4, 'd', 4.0), (4, 'd', 4.0), (5, null, null)")
    engine.execute(f"update {table} set amount = amount * 10 where id in (1, 4)")
    engine.execute(f"delete from {table} where id = 2")
    engine.execute(
        f"merge into {table} as t using (select 3 as id, 'c2' as v, 3.5 as amount "
        "union all select 6, 'f', 6.0) as s on t.id = s.id "
        "when matched then update set * when not matched then insert *"
    )
    engine.execute(f"insert into {table} values (2, 'b', 2.0)")  # back as it was at version 1
    latest = log.latest_version()
    assert latest == 6
    for v0, v1 in itertools.combinations_with_replacement(range(latest + 1), 2):
        check_interval(engine, table, log, v0, v1)


@pytest.mark.parametrize("seed", [7, 11])
def test_random_histories(engine: EmbeddedEngine, seed: int) -> None:
    """Random DML on a partitioned table with duplicates and NULLs; every interval is checked."""
    rng = random.Random(seed)
    table, log = new_table(engine, "id int, v int, p string", "partitioned by (p)")
    parts = ["'a'", "'b'", "null"]
    for _ in range(8):
        ids = [rng.randrange(8) for _ in range(rng.randrange(1, 5))]
        statement = rng.choice(["insert", "insert", "update", "move", "delete", "merge"])
        if statement == "insert":
            values = ", ".join(f"({i}, {rng.randrange(3)}, {rng.choice(parts)})" for i in ids)
            engine.execute(f"insert into {table} values {values}")
        elif statement == "update":
            engine.execute(f"update {table} set v = v + 1 where id in ({ids[0]}, {ids[-1]})")
        elif statement == "move":
            engine.execute(f"update {table} set p = {rng.choice(parts)} where id = {ids[0]}")
        elif statement == "delete":
            engine.execute(f"delete from {table} where id = {ids[0]}")
        else:
            engine.execute(
                f"merge into {table} as t using (select {ids[0]} as id, 9 as v, 'b' as p) as s "
                "on t.id = s.id when matched then update set v = s.v when not matched then insert *"
            )
    pairs = list(itertools.combinations(range(log.latest_version() + 1), 2))
    assert IntervalKind.MIXED in {log.interval(v0, v1).kind for v0, v1 in pairs}
    for v0, v1 in pairs:
        check_interval(engine, table, log, v0, v1)


def test_partitioned_table_and_a_row_moving_partition(engine: EmbeddedEngine) -> None:
    table, log = new_table(
        engine, "id int, v string, day date, region string", "partitioned by (day, region)"
    )
    engine.execute(
        f"insert into {table} values (1, 'a', date'2024-01-01', 'eu west'), "
        "(2, 'b', date'2024-01-01', 'us/east'), (3, 'c', date'2024-01-02', null), "
        "(4, 'd', null, 'eu west')"
    )
    engine.execute(f"update {table} set region = 'us/east', v = 'moved' where id = 1")
    engine.execute(f"update {table} set day = date'2024-01-03' where id = 3")
    engine.execute(f"insert into {table} values (5, 'e', date'2024-01-03', null)")
    assert log.partition_columns == ("day", "region")
    assert log.interval(1, 2).kind is IntervalKind.MIXED
    for v0, v1 in itertools.combinations(range(log.latest_version() + 1), 2):
        check_interval(engine, table, log, v0, v1)


def test_typed_partition_values(engine: EmbeddedEngine) -> None:
    table, log = new_table(
        engine,
        "id int, ts timestamp, amount decimal(6,2), flag boolean",
        "partitioned by (ts, amount, flag)",
    )
    engine.execute(
        f"insert into {table} values (1, timestamp'2024-01-01 12:30:00', 1.50, true), "
        "(2, null, null, null), (3, timestamp'2024-06-30 23:59:59.123456', 0.05, false)"
    )
    engine.execute(f"update {table} set ts = timestamp'2025-01-01 00:00:00', flag = false where id = 1")
    engine.execute(f"delete from {table} where id = 2")
    for v0, v1 in itertools.combinations(range(log.latest_version() + 1), 2):
        check_interval(engine, table, log, v0, v1)


def test_map_columns_keep_the_redundant_form(engine: EmbeddedEngine) -> None:
    """Maps cannot be grouped, so a MIXED interval is not minimised; it is still the right delta."""
    table, log = new_table(engine, "id int, tags map<string, int>")
    engine.execute(f"insert into {table} values (1, map('a', 1)), (2, map('b', 2)), (3, map())")
    engine.execute(f"update {table} set tags = map('c', 3) where id = 2")
    view = register_changes(engine.spark, log, 1, 2, "changes_with_maps")
    rows = engine.spark.table(view).collect()
    engine.spark.catalog.dropTempView(view)
    assert len(rows) == 6  # the whole rewritten file on both sides
    delta: Counter = Counter()
    for row in rows:
        delta[(row["id"], tuple(sorted(row["tags"].items())))] += row[WEIGHT]
    assert {k: n for k, n in delta.items() if n} == {(2, (("b", 2),)): -1, (2, (("c", 3),)): 1}


def test_empty_interval_is_an_empty_view_with_the_columns(engine: EmbeddedEngine) -> None:
    table, log = new_table(engine, "id int, v string")
    engine.execute(f"insert into {table} values (1, 'a')")
    assert log.interval(1, 1).kind is IntervalKind.EMPTY
    assert check_interval(engine, table, log, 1, 1) == Counter()
    assert check_interval(engine, table, log, 0, 0) == Counter()  # the table was still empty


def test_deletion_vectors_are_read_as_the_rows_they_mask(engine: EmbeddedEngine) -> None:
    """A DELETE or UPDATE through deletion vectors re-adds a file under its path with more rows
    masked: those rows are the deletes, read from that file alone."""
    table, log = new_table(
        engine, "id int, part string, v string",
        "partitioned by (part) tblproperties ('delta.enableDeletionVectors' = 'true')",
    )
    engine.execute(f"insert into {table} values " + ", ".join(f"({i}, 'p{i % 2}', 'v{i}')" for i in range(20)))
    engine.execute(f"delete from {table} where id in (2, 3, 11)")
    engine.execute(f"update {table} set v = 'changed' where id = 5")
    engine.execute(f"delete from {table} where id in (4, 5)")  # the same files' vectors grow
    latest = log.latest_version()
    assert any(f.has_deletion_vector for f in log.snapshot(latest).files.values())
    interval = log.interval(1, 2)
    assert interval.differentiable and interval.masked and interval.kind is IntervalKind.REMOVED_ONLY
    assert check_interval(engine, table, log, 1, 2) == Counter(
        {((i, f"p{i % 2}", f"v{i}"), -1): 1 for i in (2, 3, 11)}
    )
    for v0 in range(1, latest):
        for v1 in range(v0 + 1, latest + 1):
            check_interval(engine, table, log, v0, v1)  # against time travel, as multisets
    assert log.interval(0, 1).differentiable  # before any vector, inserts are plain files


def test_resolver_serves_the_differentiation_engine(engine: EmbeddedEngine) -> None:
    orders, orders_log = new_table(engine, "id int, customer int, amount double")
    customers, customers_log = new_table(engine, "id int, name string")
    engine.execute(f"insert into {orders} values (1, 1, 10.0), (2, 2, 20.0)")
    engine.execute(f"insert into {customers} values (1, 'ann'), (2, 'bob')")
    engine.execute(f"insert into {orders} values (3, 1, 30.0)")
    engine.execute(f"update {customers} set name = 'bo' where id = 2")
    schema, orders_name = orders.split(".")
    customers_name = customers.split(".")[1]
    # The query may spell a source quoted or in another case; Spark resolves both to one table.
    sources = {orders: (orders_log, 1, 2), f"`{schema.upper()}`.`{customers_name}`": (customers_log, 1, 2)}
    resolver = FileSetResolver(engine.spark, sources)
    with resolver:
        assert resolver.before(orders) == f"`{schema}`.`{orders_name}` VERSION AS OF 1"
        assert resolver.is_insert_only(orders) and not resolver.is_unchanged(orders)
        assert not resolver.is_insert_only(customers)
        assert resolver.undifferentiable() == {}
        # Δ(orders ⋈ customers) = Δorders ⋈ customers|v0 + orders|v1 ⋈ Δcustomers, with qualified
        # time-travel relations inside joins.
        delta_join = f"""
            select o.id, c.name, o._dyn_weight as w
            from {resolver.changes(orders)} o join {resolver.before(customers)} c on o.customer = c.id
            union all
            select o.id, c.name, c._dyn_weight as w
            from {resolver.after(orders)} o join {resolver.changes(customers)} c on o.customer = c.id
        """
        got: Counter = Counter()
        for row in engine.spark.sql(delta_join).collect():
            got[(row["id"], row["name"])] += row["w"]

        def join_at(v: int) -> Counter:
            query = (
                f"select o.id, c.name from {orders} version as of {v} o "
                f"join {customers} version as of {v} c on o.customer = c.id"
            )
            return Counter(tuple(r) for r in engine.spark.sql(query).collect())

        expected = join_at(2)
        expected.subtract(join_at(1))
        assert {k: v for k, v in got.items() if v} == {k: v for k, v in expected.items() if v}
        assert {(3, "ann"): 1, (2, "bo"): 1, (2, "bob"): -1} == {k: v for k, v in got.items() if v}
        view = resolver.changes(orders)
        assert resolver.changes(orders.upper()) == view  # registered once, names case-insensitive
    assert view not in {t.name for t in engine.spark.catalog.listTables()}
    with pytest.raises(Exception):
        engine.spark.sql(f"select * from {view}").collect()


def test_resolver_reports_undifferentiable_sources(engine: EmbeddedEngine) -> None:
    table, log = new_table(engine, "id int")
    engine.execute(f"insert into {table} values (1), (2)")
    engine.execute(f"insert into {table} values (3)")
    DeltaTable(engine.warehouse.table_location(*table.split("."))).restore(1)
    with FileSetResolver(engine.spark, {table: (log, 2, 3)}) as resolver:
        assert not resolver.is_unchanged(table) and not resolver.is_insert_only(table)
        (reason,) = resolver.undifferentiable().values()
        assert "restored" in reason
        with pytest.raises(UndifferentiableSource):
            resolver.changes(table)
        with pytest.raises(KeyError):
            resolver.changes("chx.not_a_source")


# -- change data feed ------------------------------------------------------------------------------


def test_change_data_feed_is_gated_by_capability_and_table(engine: EmbeddedEngine) -> None:
    # Sail cannot write tables with the feed enabled; deltalake can, and Sail reads them.
    name = f"t_{uuid.uuid4().hex[:8]}"
    location = engine.warehouse.table_location(SCHEMA, name)
    write_deltalake(location, pa.table({"id": pa.array([1, 2], pa.int32())}),
                    configuration={"delta.enableChangeDataFeed": "true"})
    DeltaTable(location).update(updates={"id": "3"}, predicate="id = 2")
    table, log = f"{SCHEMA}.{name}", DeltaLog(location)
    engine.execute(f"create table {table} (id int) using delta location '{location}'")
    assert log.change_data_feed_covers(0, 1)
    with pytest.raises(ChangeDataFeedUnavailable, match="no change data feed"):
        register_changes_from_cdf(engine.spark, engine.capabilities, log, 0, 1, "never_created")
    plain, plain_log = new_table(engine, "id int")
    engine.execute(f"insert into {plain} values (1)")
    with_feed = Capabilities(
        change_data_feed=True, truncate=False, alter_table_columns=False, persistent_catalog=False
    )
    with pytest.raises(ChangeDataFeedUnavailable, match="enableChangeDataFeed"):
        register_changes_from_cdf(engine.spark, with_feed, plain_log, 0, 1, "never_created")
    # An engine without the feed reads file sets, even for a table that enables it.
    with FileSetResolver(engine.spark, {table: (log, 0, 1)}, capabilities=engine.capabilities) as resolver:
        got = net(view_rows(engine, resolver.changes(table)))
    assert got == truth(engine, table, 0, 1) == {(2,): -1, (3,): 1}


@pytest.fixture(scope="module")
def jvm_engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """JVM Spark with Delta, only under ``pytest -m jvm`` in a process of its own (PySpark cannot
    open a classic session beside the embedded engine's Spark Connect one)."""
    if "jvm" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("JVM Spark tests run on their own: pytest -m jvm tests/functional/test_change_extraction.py")
    from dbt.adapters.dyntable.engines.jvm import JvmSparkEngine

    jars = os.environ.get(SPARK_JARS_ENV)
    jvm = JvmSparkEngine(
        tmp_path_factory.mktemp("jvm-warehouse"),
        spark_jars=Path(jars) if jars else None,
        spark_conf={"spark.sql.session.timeZone": "UTC", "spark.sql.shuffle.partitions": "2"},
        start_timeout=120,
    )
    try:
        jvm.start()
    except EngineError as exc:
        pytest.skip(
            f"JVM Delta jars not resolvable: set {SPARK_JARS_ENV} to a folder with delta-spark_2.13 "
            f"and delta-storage jars, or allow Maven access ({str(exc).splitlines()[0][:90]})"
        )
    yield jvm
    jvm.stop()


@pytest.mark.jvm
def test_change_data_feed_and_file_sets_agree_on_jvm(jvm_engine: Engine, tmp_path: Path) -> None:
    table = "chx_jvm.cdf"
    location = tmp_path / "cdf"
    jvm_engine.execute("create schema if not exists chx_jvm")
    jvm_engine.execute(
        f"create table {table} (id int, v string, day date) using delta partitioned by (day) "
        f"location '{location}' tblproperties (delta.enableChangeDataFeed = true)"
    )
    jvm_engine.execute(f"insert into {table} values (1, 'a', date'2024-01-01'), (2, 'b', date'2024-01-02')")
    jvm_engine.execute(f"insert into {table} values (3, 'c', date'2024-01-01'), (3, 'c', date'2024-01-01')")
    jvm_engine.execute(f"update {table} set v = 'z', day = date'2024-01-02' where id = 1")
    jvm_engine.execute(f"delete from {table} where id = 2")
    log = DeltaLog(location)
    latest = log.latest_version()
    for v0, v1 in itertools.combinations(range(1, latest + 1), 2):
        assert log.change_data_feed_covers(v0, v1)
        check_interval(jvm_engine, table, log, v0, v1, from_feed=True)
        check_interval(jvm_engine, table, log, v0, v1)
    with FileSetResolver(jvm_engine.spark, {table: (log, 2, latest)}, capabilities=jvm_engine.capabilities) as r:
        assert net(view_rows(jvm_engine, r.changes(table))) == truth(jvm_engine, table, 2, latest)


def test_every_version_reads_right_behind_checkpoints(engine: EmbeddedEngine) -> None:
    """Sail's `VERSION AS OF` fails for most versions behind the latest checkpoint (one every 10
    commits); VersionedRelations reads those from their files, partition values included."""
    table, log = new_table(engine, "id int, p string", "partitioned by (p)")
    for i in range(23):
        engine.execute(f"insert into {table} values ({i}, '{'ab'[i % 2]}'), ({i}, null)")
        if i == 14:
            engine.execute(f"delete from {table} where id < 3")
    latest = log.latest_version()
    assert log.latest_checkpoint() is not None and log.latest_checkpoint() >= 20
    with VersionedRelations(engine.spark, engine.capabilities) as relations:
        assert "VERSION AS OF" not in relations.relation(table, log, 5)
        assert relations.relation(table, log, latest) == f"{table} VERSION AS OF {latest}"
        for version in range(latest + 1):
            relation = relations.relation(table, log, version)
            got = Counter(tuple(r) for r in engine.spark.sql(f"select id, p from {relation}").collect())
            expected = Counter(
                (r["id"], r["p"]) for r in DeltaTable(log.location, version=version).to_pyarrow_table().to_pylist()
            )
            assert got == expected, f"version {version}"
