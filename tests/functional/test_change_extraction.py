"""Change extraction on the engine under test: the change views equal the true row delta.

Ground truth for an interval (v0, v1] is ``v1 EXCEPT ALL v0`` (+1) and ``v0 EXCEPT ALL v1`` (-1),
evaluated by the engine with ``VERSION AS OF``; a change view must equal it as a multiset after
consolidation, whatever DML produced the versions.
"""

from __future__ import annotations

import itertools
import random
import urllib.parse
import uuid
from collections import Counter
from dataclasses import replace
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Callable, Dict, Iterator, List, Tuple

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from dbt.adapters.dyntable import changes
from dbt.adapters.dyntable.changes import (
    WEIGHT,
    ChangeDataFeedUnavailable,
    FileSetResolver,
    UndifferentiableSource,
    VersionedRelations,
    change_schema,
    changes_in_process,
    register_changes,
    register_changes_from_cdf,
)
from dbt.adapters.dyntable.data_files import NotReadableInProcess
from dbt.adapters.dyntable.delta_log import DeltaLog, IntervalKind, deltalake_snapshots
from dbt.adapters.dyntable.engines.base import Capabilities, Engine, arrow_frame

SCHEMA = "chx"
Row = Tuple[object, ...]
NO_FEED = Capabilities(
    change_data_feed=False, truncate=False, alter_table_columns=False, persistent_catalog=False
)
WITH_FEED = Capabilities(
    change_data_feed=True, truncate=False, alter_table_columns=False, persistent_catalog=False
)


@pytest.fixture(scope="module")
def engine(engine: Engine) -> Iterator[Engine]:
    """The session's engine, with this module's schema."""
    engine.execute(f"create schema if not exists {SCHEMA}")
    yield engine
    engine.execute(f"drop schema if exists {SCHEMA} cascade")


@pytest.fixture
def feed_reads(monkeypatch: pytest.MonkeyPatch) -> List[Tuple[int, int]]:
    """The intervals the resolver read from a change data feed (the real reads, recorded)."""
    reads: List[Tuple[int, int]] = []
    original: Callable[..., str] = changes.register_changes_from_cdf

    def recording(spark, capabilities, log, v0, v1, view_name):  # noqa: ANN001
        reads.append((v0, v1))
        return original(spark, capabilities, log, v0, v1, view_name)

    monkeypatch.setattr(changes, "register_changes_from_cdf", recording)
    return reads


def new_table(engine: Engine, columns: str, extra: str = "") -> Tuple[str, DeltaLog]:
    name = f"t_{uuid.uuid4().hex[:8]}"
    engine.execute(f"create table {SCHEMA}.{name} ({columns}) using delta {extra}")
    location = engine.table_location(SCHEMA, name)
    assert location is not None
    return f"{SCHEMA}.{name}", DeltaLog(location)


def truth(engine: Engine, table: str, v0: int, v1: int) -> Dict[Row, int]:
    before = engine.spark.sql(f"select * from {table} version as of {v0}")
    after = engine.spark.sql(f"select * from {table} version as of {v1}")
    delta: Counter = Counter()
    for row in after.exceptAll(before).collect():
        delta[values(row)] += 1
    for row in before.exceptAll(after).collect():
        delta[values(row)] -= 1
    return {row: n for row, n in delta.items() if n}


def view_rows(engine: Engine, view: str) -> Counter:
    """(row, weight) multiset of a change view."""
    return weighted(engine.spark.sql(f"select * from {view}").collect())


def weighted(rows: List[Row]) -> Counter:
    """(row, weight) multiset of changes."""
    return Counter((values(r)[:-1], r[WEIGHT]) for r in rows)


def values(row: Row) -> Row:
    """A row's values, hashable (Spark gives BINARY values as ``bytearray``)."""
    return tuple(bytes(v) if isinstance(v, bytearray) else v for v in row)


def net(rows: Counter) -> Dict[Row, int]:
    total: Counter = Counter()
    for (row, weight), count in rows.items():
        total[row] += weight * count
    return {row: n for row, n in total.items() if n}


def check_interval(
    engine: Engine,
    table: str,
    log: DeltaLog,
    v0: int,
    v1: int,
    *,
    from_feed: bool = False,
    in_process: bool = True,
) -> Counter:
    """The interval's change view against time travel; and, with ``in_process``, the changes
    read in this process (``changes_in_process``) against the view: the same columns, types
    and rows (without it, that they are refused)."""
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
        if not in_process:
            with pytest.raises(NotReadableInProcess):
                changes_in_process(log, log.interval(v0, v1))
            return rows
        interval = log.interval(v0, v1)
        frame = arrow_frame(engine.spark, changes_in_process(log, interval), change_schema(log, interval))
        held = weighted(frame.collect())
        assert [(f.name, f.dataType) for f in frame.schema] == [
            (f.name, f.dataType) for f in engine.spark.table(view).schema
        ]
        if from_feed:  # the feed's rows are not minimized
            assert net(held) == net(rows), f"in process, ({v0}, {v1}]"
        else:
            assert held == rows, f"in process, ({v0}, {v1}]"
        return rows
    finally:
        engine.spark.catalog.dropTempView(view)


def test_inserts_are_added_only(engine: Engine) -> None:
    table, log = new_table(engine, "id int, v string")
    engine.execute(f"insert into {table} values (1, 'a'), (2, 'b')")
    engine.execute(f"insert into {table} values (3, 'c'), (3, 'c')")  # duplicates are real rows
    assert log.interval(0, 2).kind is IntervalKind.ADDED_ONLY
    rows = check_interval(engine, table, log, 0, 2)
    assert rows == Counter({((1, "a"), 1): 1, ((2, "b"), 1): 1, ((3, "c"), 1): 2})


@pytest.mark.jvm_ci
def test_update_is_minimized(engine: Engine) -> None:
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


@pytest.mark.jvm_ci
def test_delete_of_whole_files_is_removed_only(engine: Engine) -> None:
    table, log = new_table(engine, "id int, v string")
    engine.execute(f"insert into {table} values (1, 'a'), (2, 'b')")
    engine.execute(f"insert into {table} values (3, 'c')")
    engine.execute(f"delete from {table} where id = 3")
    assert log.interval(2, 3).kind is IntervalKind.REMOVED_ONLY
    assert check_interval(engine, table, log, 2, 3) == Counter({((3, "c"), -1): 1})
    engine.execute(f"delete from {table} where id = 1")  # a partial delete rewrites the file
    assert log.interval(3, 4).kind is IntervalKind.MIXED
    check_interval(engine, table, log, 3, 4)


def mixed_history(engine: Engine) -> Tuple[str, DeltaLog]:
    """A table through six statements: inserts with duplicates and NULLs, an update, a delete, a
    merge, and a row inserted back as it was at version 1."""
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
    engine.execute(f"insert into {table} values (2, 'b', 2.0)")
    assert log.latest_version() == 6
    return table, log


def test_every_interval_of_a_mixed_history(engine: Engine) -> None:
    table, log = mixed_history(engine)
    latest = log.latest_version()
    for v0, v1 in itertools.combinations_with_replacement(range(latest + 1), 2):
        check_interval(engine, table, log, v0, v1)


@pytest.mark.jvm_ci
def test_intervals_count_the_rows_the_engines_statements_changed(engine: Engine) -> None:
    """AUTO weighs a window's re-sorting by the rows a change touches, counted from the engine's
    own commit metrics (docs/ARCHITECTURE.md, "Deciding"): one statement's count is exactly its
    delta's rows (an updated row removed and added), and an interval's is its statements' sum,
    at least the net change, where a row deleted and inserted back cancels."""
    table, log = mixed_history(engine)
    latest = log.latest_version()
    changed = {v: log.interval(v - 1, v).changed_rows for v in range(1, latest + 1)}
    assert changed == {
        v: sum(abs(n) for n in truth(engine, table, v - 1, v).values()) for v in range(1, latest + 1)
    }
    whole = log.interval(0, latest).changed_rows
    assert whole == sum(changed.values()) > sum(abs(n) for n in truth(engine, table, 0, latest).values())


@pytest.mark.parametrize("seed", [7, 11])
def test_random_histories(engine: Engine, seed: int) -> None:
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


@pytest.mark.jvm_ci
def test_partitioned_table_and_a_row_moving_partition(engine: Engine) -> None:
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


def test_typed_partition_values(engine: Engine) -> None:
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


def test_map_columns_keep_the_redundant_form(engine: Engine) -> None:
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


def test_empty_interval_is_an_empty_view_with_the_columns(engine: Engine) -> None:
    table, log = new_table(engine, "id int, v string")
    engine.execute(f"insert into {table} values (1, 'a')")
    assert log.interval(1, 1).kind is IntervalKind.EMPTY
    assert check_interval(engine, table, log, 1, 1) == Counter()
    assert check_interval(engine, table, log, 0, 0) == Counter()  # the table was still empty


@pytest.mark.jvm_ci
def test_deletion_vectors_are_read_as_the_rows_they_mask(engine: Engine) -> None:
    """A DELETE or UPDATE through deletion vectors re-adds a file under its path with more rows
    masked: those rows are the deletes, read from that file alone."""
    table, log = new_table(
        engine,
        "id int, part string, v string",
        "partitioned by (part) tblproperties ('delta.enableDeletionVectors' = 'true')",
    )
    engine.execute(
        f"insert into {table} values " + ", ".join(f"({i}, 'p{i % 2}', 'v{i}')" for i in range(20))
    )
    engine.execute(f"delete from {table} where id in (2, 3, 11)")
    engine.execute(f"update {table} set v = 'changed' where id = 5")
    engine.execute(f"delete from {table} where id in (4, 5)")  # the same files' vectors grow
    latest = log.latest_version()
    assert bool(log.snapshot(latest).deleted_rows)
    interval = log.interval(1, 2)
    assert interval.differentiable and interval.masked and interval.kind is IntervalKind.REMOVED_ONLY
    assert check_interval(engine, table, log, 1, 2) == Counter(
        {((i, f"p{i % 2}", f"v{i}"), -1): 1 for i in (2, 3, 11)}
    )
    for v0 in range(1, latest):
        for v1 in range(v0 + 1, latest + 1):
            check_interval(engine, table, log, v0, v1)  # against time travel, as multisets
    assert log.interval(0, 1).differentiable  # before any vector, inserts are plain files


@pytest.mark.jvm_ci
def test_a_vectors_change_is_read_from_the_vectors_the_commits_name(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The change of a DELETE and an UPDATE through a deletion vector is read from the vectors
    the commits name (the file's before and after), never from every vector of a snapshot, which
    ``deltalake`` hands out as one flag per row of each file (docs/ARCHITECTURE.md, "Reading
    sources")."""
    table, log = new_table(
        engine, "id int, v string", "tblproperties ('delta.enableDeletionVectors' = 'true')"
    )
    engine.execute(f"insert into {table} values " + ", ".join(f"({i}, 'v{i}')" for i in range(20)))
    engine.execute(f"delete from {table} where id = 3")
    engine.execute(f"update {table} set v = 'changed' where id in (4, 5)")  # the vector grows
    latest = log.latest_version()
    every_vector: List[int] = []
    original = deltalake_snapshots._deletion_vectors
    monkeypatch.setattr(
        deltalake_snapshots,
        "_deletion_vectors",
        lambda files, version, *rest: every_vector.append(version) or original(files, version, *rest),
    )
    fresh = DeltaLog(log.location)
    assert fresh.interval(latest - 2, latest).masked_rows == 3
    rows = check_interval(engine, table, fresh, latest - 2, latest)
    assert net(rows) == {(3, "v3"): -1, (4, "v4"): -1, (5, "v5"): -1, (4, "changed"): 1, (5, "changed"): 1}
    assert every_vector == []
    assert bool(fresh.snapshot(latest).deleted_rows)  # asked for, they are there


@pytest.mark.jvm_ci
@pytest.mark.parametrize("vectors", [False, True], ids=["versions", "deletion_vector"])
def test_files_a_writer_typed_its_own_way(engine: Engine, vectors: bool) -> None:
    """The `deltalake` package writes an UPDATE's files with Arrow view types (`string_view`, in a
    struct too) and its appends with plain ones, and a file's footer says which: Sail fails to scan
    such files together, PySpark takes no view type from Arrow. Every interval reads right, a
    deletion vector on the UPDATE's file included, and so does every version read from its files
    (reader protocol 1: without vectors)."""
    name = f"t_{uuid.uuid4().hex[:8]}"
    location = engine.warehouse.table_location(SCHEMA, name)
    struct = pa.struct([("x", pa.int32()), ("y", pa.string())])

    def rows(ids: List[int]) -> pa.Table:
        return pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "g": [f"g{i % 3}" for i in ids],
                "st": pa.array([{"x": i, "y": f"p{i}"} for i in ids], struct),
            }
        )

    write_deltalake(
        location, rows(list(range(6))), configuration={"delta.enableDeletionVectors": str(vectors).lower()}
    )
    DeltaTable(location).update(updates={"g": "'c'"}, predicate="id = 1")
    write_deltalake(location, rows([-1]), mode="append")
    table, log = f"{SCHEMA}.{name}", DeltaLog(location)
    engine.execute(f"create table {table} using delta location '{location}'")
    if vectors:
        engine.execute(f"delete from {table} where id = 2")  # a vector on the file the UPDATE wrote
    latest = log.latest_version()
    files = log.snapshot(latest).files.values()
    declared = {pq.read_schema(urllib.parse.unquote(f.uri[len("file://") :])).field("st").type for f in files}
    assert declared == {struct, pa.struct([("x", pa.int32()), ("y", pa.string_view())])}
    assert bool(log.snapshot(latest).deleted_rows) is vectors
    for v0 in range(latest):
        check_interval(engine, table, log, v0, latest, in_process=False)  # Arrow groups no struct
    if vectors:
        return
    with VersionedRelations(
        engine.spark, replace(engine.capabilities, versions_from_files=10_000)
    ) as relations:
        for version in range(latest + 1):
            relation = relations.relation(table, log, version)
            assert "VERSION AS OF" not in relation
            got = Counter(tuple(r) for r in engine.spark.sql(f"select id, g, st.y from {relation}").collect())
            expected = Counter(
                (r["id"], r["g"], r["st"]["y"])
                for r in DeltaTable(location, version=version).to_pyarrow_table().to_pylist()
            )
            assert got == expected, f"version {version}"


@pytest.mark.jvm_ci
def test_plain_types_and_files_written_before_a_column(engine: Engine) -> None:
    """Data columns of each type read in this process (timestamps with and without a zone, dates,
    decimals, bytes, infinities, small integers, NULLs), and an UPDATE rewriting a file written
    before a column was added: every interval reads the same in the engine and in this process."""
    name = f"t_{uuid.uuid4().hex[:8]}"
    location = engine.warehouse.table_location(SCHEMA, name)

    def rows(ids: List[int]) -> pa.Table:
        return pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "at": pa.array(
                    [datetime(2024, 1, i + 1, 12, 30, i, i, timezone.utc) for i in ids],
                    pa.timestamp("us", "UTC"),
                ),
                "local": pa.array([datetime(2024, 6, 30, 23, 59, i) for i in ids], pa.timestamp("us")),
                "day": pa.array([date(2024, 2, 28 + i % 2) for i in ids], pa.date32()),
                "amount": pa.array([Decimal(f"{i}.05") if i % 3 else None for i in ids], pa.decimal128(6, 2)),
                "raw": pa.array([bytes([i, 0]) for i in ids], pa.binary()),
                "ratio": pa.array([float("inf") if i % 2 else -1.5 for i in ids], pa.float64()),
                "small": pa.array([i - 3 for i in ids], pa.int8()),
            }
        )

    write_deltalake(location, rows([1, 2, 3]))
    later = rows([4, 5]).append_column("note", pa.array(["n4", None]))
    write_deltalake(location, later, mode="append", schema_mode="merge")
    DeltaTable(location).update(updates={"small": "small + 10"}, predicate="id = 1")
    DeltaTable(location).update(updates={"note": "'changed'"}, predicate="id = 5")
    table, log = f"{SCHEMA}.{name}", DeltaLog(location)
    engine.execute(f"create table {table} using delta location '{location}'")
    assert log.interval(1, 2).kind is IntervalKind.MIXED  # the rewritten file lacks `note`
    for v0, v1 in itertools.combinations(range(log.latest_version() + 1), 2):
        if log.interval(v0, v1).differentiable:  # not across the column's addition
            check_interval(engine, table, log, v0, v1)


@pytest.mark.jvm_ci
def test_resolver_serves_the_differentiation_engine(engine: Engine) -> None:
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
    assert view not in {row.tableName for row in engine.spark.sql("SHOW TABLES").collect()}
    with pytest.raises(Exception):
        engine.spark.sql(f"select * from {view}").collect()


def test_resolver_reports_undifferentiable_sources(engine: Engine) -> None:
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


@pytest.mark.jvm_ci
def test_change_data_feed_needs_the_engine_and_the_table(
    engine: Engine, feed_reads: List[Tuple[int, int]]
) -> None:
    # Sail cannot write tables with the feed enabled; deltalake can, and every engine reads them.
    name = f"t_{uuid.uuid4().hex[:8]}"
    location = engine.warehouse.table_location(SCHEMA, name)
    write_deltalake(
        location,
        pa.table({"id": pa.array([1, 2], pa.int32())}),
        configuration={"delta.enableChangeDataFeed": "true"},
    )
    DeltaTable(location).update(updates={"id": "3"}, predicate="id = 2")
    table, log = f"{SCHEMA}.{name}", DeltaLog(location)
    engine.execute(f"create table {table} (id int) using delta location '{location}'")
    assert log.change_data_feed_covers(0, 1)
    with pytest.raises(ChangeDataFeedUnavailable, match="no change data feed"):
        register_changes_from_cdf(engine.spark, NO_FEED, log, 0, 1, "never_created")
    plain, plain_log = new_table(engine, "id int")
    engine.execute(f"insert into {plain} values (1)")
    with pytest.raises(ChangeDataFeedUnavailable, match="enableChangeDataFeed"):
        register_changes_from_cdf(engine.spark, WITH_FEED, plain_log, 0, 1, "never_created")
    # Without the feed, changes come from file sets, even for a table that enables it.
    with FileSetResolver(engine.spark, {table: (log, 0, 1)}, capabilities=NO_FEED) as resolver:
        got = net(view_rows(engine, resolver.changes(table)))
    assert got == truth(engine, table, 0, 1) == {(2,): -1, (3,): 1}
    assert feed_reads == []  # the resolver never asked for the feed


@pytest.mark.skip_profile("embedded", reason="the embedded engine has no change data feed")
@pytest.mark.jvm_ci
def test_change_data_feed_and_file_sets_agree(engine: Engine, feed_reads: List[Tuple[int, int]]) -> None:
    """On an engine with the feed, every interval read from the feed equals the one read from file
    sets and the truth; the resolver reads rewrites (updates, deletes) from the feed."""
    assert engine.capabilities.change_data_feed
    table, log = new_table(
        engine,
        "id int, v string, day date",
        "partitioned by (day) tblproperties (delta.enableChangeDataFeed = true)",
    )
    engine.execute(f"insert into {table} values (1, 'a', date'2024-01-01'), (2, 'b', date'2024-01-02')")
    engine.execute(f"insert into {table} values (3, 'c', date'2024-01-01'), (3, 'c', date'2024-01-01')")
    engine.execute(f"update {table} set v = 'z', day = date'2024-01-02' where id = 1")
    engine.execute(f"delete from {table} where id = 2")
    engine.execute(f"insert into {table} values (4, 'd', date'2024-01-03')")
    latest = log.latest_version()
    for v0, v1 in itertools.combinations(range(1, latest + 1), 2):
        assert log.change_data_feed_covers(v0, v1)
        check_interval(engine, table, log, v0, v1, from_feed=True)
        check_interval(engine, table, log, v0, v1)
    feed_reads.clear()
    assert log.interval(2, latest).kind is IntervalKind.MIXED
    assert log.interval(latest - 1, latest).kind is IntervalKind.ADDED_ONLY
    with FileSetResolver(engine.spark, {table: (log, 2, latest)}, capabilities=engine.capabilities) as r:
        assert net(view_rows(engine, r.changes(table))) == truth(engine, table, 2, latest)
    with FileSetResolver(
        engine.spark, {table: (log, latest - 1, latest)}, capabilities=engine.capabilities
    ) as r:
        assert net(view_rows(engine, r.changes(table))) == truth(engine, table, latest - 1, latest)
    # The rewrite came from the feed; the append was read from its added files.
    assert feed_reads == [(2, latest)]


@pytest.mark.jvm_ci
@pytest.mark.parametrize("from_files", [0, 10_000], ids=["time_travel", "small_versions_from_files"])
def test_every_version_reads_right_behind_checkpoints(engine: Engine, from_files: int) -> None:
    """Sail's `VERSION AS OF` fails for most versions behind the latest checkpoint (one every 10
    commits); VersionedRelations reads those from their files there, partition values included.
    A version of few enough files (``Capabilities.versions_from_files``) is read from its files
    on any engine. Every version reads right either way."""
    table, log = new_table(engine, "id int, p string", "partitioned by (p)")
    for i in range(23):
        engine.execute(f"insert into {table} values ({i}, '{'ab'[i % 2]}'), ({i}, null)")
        if i == 14:
            engine.execute(f"delete from {table} where id < 3")
    latest = log.latest_version()
    assert log.latest_checkpoint() is not None and log.latest_checkpoint() >= 20
    capabilities = replace(engine.capabilities, versions_from_files=from_files)
    with VersionedRelations(engine.spark, capabilities) as relations:
        behind = relations.relation(table, log, 5)
        if from_files:
            assert "VERSION AS OF" not in behind and "VERSION AS OF" not in relations.relation(
                table, log, latest
            )
        else:
            # Engines whose time travel reads those versions get VERSION AS OF; the others a view.
            assert ("VERSION AS OF" in behind) is engine.capabilities.time_travel_behind_checkpoint
            assert relations.relation(table, log, latest) == f"{table} VERSION AS OF {latest}"
        for version in range(latest + 1):
            relation = relations.relation(table, log, version)
            got = Counter(tuple(r) for r in engine.spark.sql(f"select id, p from {relation}").collect())
            expected = Counter(
                (r["id"], r["p"])
                for r in DeltaTable(log.location, version=version).to_pyarrow_table().to_pylist()
            )
            assert got == expected, f"version {version}"
