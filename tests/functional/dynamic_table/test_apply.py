"""Applying Z-set deltas to a DT: bag semantics and the production validations
(docs/ARCHITECTURE.md, "Applying"), on the engine under test."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from deltalake import DeltaTable

from dbt.adapters.dyntable.differentiation.aggregate import Accumulation
from dbt.adapters.dyntable.dynamic_table.config import DynamicTableConfig
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.refresh import apply, deltalake_writer
from dbt.adapters.dyntable.dynamic_table.refresh.apply import DeltaValidationError, folding, prepare
from dbt.adapters.dyntable.dynamic_table.refresh.engine_writer import EngineWriter
from dbt.adapters.dyntable.dynamic_table.refresh.target import Target
from dbt.adapters.dyntable.dynamic_table.refresh.write import writer_for
from dbt.adapters.dyntable.vocabulary import WEIGHT

pytestmark = pytest.mark.jvm_ci

COLUMNS = ["k", "v"]


def schema_for(prefix, request):
    """A schema of the test's own, named after it (letters, digits and underscores)."""
    return prefix + re.sub(r"\W", "_", request.node.name.lower())[-40:]


@pytest.fixture
def dt(engine, request):
    schema = schema_for("apply_", request)
    engine.execute(f"create schema if not exists {schema}")
    engine.execute(f"create table {schema}.dt (k bigint, v string) using delta")
    engine.execute(f"insert into {schema}.dt values (1, 'a'), (1, 'a'), (2, null), (3, 'c')")
    table = DynamicTable(
        schema, "dt", "select 1", DynamicTableConfig.from_model("dt", {"target_lag": "1 minute"})
    )
    yield table
    engine.execute(f"drop schema {schema} cascade")


def contents(engine, dt):
    return Counter(map(tuple, engine.execute(f"select k, v from {dt.relation}").collect()))


def version(engine, dt):
    return DeltaTable(engine.table_location(dt.schema, dt.identifier)).version()


def last_commit(engine, dt):
    return DeltaTable(engine.table_location(dt.schema, dt.identifier)).history(1)[0]


def written_here(engine, dt):
    """The DT's last commit is deltalake's, from this process, and the engine allows that
    (``Capabilities.merge_in_process``: rows this process holds are written by it)."""
    written = last_commit(engine, dt).get("clientVersion", "").startswith("delta-rs")
    return written == engine.capabilities.merge_in_process


def counting_held_rows_here(engine, monkeypatch, here: bool) -> None:
    """Whether a staged delta's copies in the DT are counted in this process from the DT's files
    (``Capabilities.counts_held_rows_in_process``), whatever the engine under test does."""
    monkeypatch.setattr(
        engine, "capabilities", replace(engine.capabilities, counts_held_rows_in_process=here)
    )


@pytest.fixture(params=["one_job", "bounded_by_the_delta", "counted_here"])
def staging(request, engine, monkeypatch):
    """How a delta that reads the DT is staged (``apply._staged``): with the DT read whole in the
    delta's own job (a small DT), in a second job reading the DT's rows within the delta's
    bounds (a DT of ``BOUNDED_STAGING_BYTES`` or more, here every DT), or with the DT's files
    read in this process (``held_rows``)."""
    counting_held_rows_here(engine, monkeypatch, request.param == "counted_here")
    if request.param == "bounded_by_the_delta":
        monkeypatch.setattr(apply, "BOUNDED_STAGING_BYTES", 0)
    return request.param


def apply_delta(target, delta):
    """``delta`` applied as a refresh applies it, by the writer ``write.writer_for`` chooses."""
    return writer_for(target, delta).apply(delta, None)


def append(target, delta_sql, columns):
    return EngineWriter(target).append(delta_sql, columns, None)


def accumulate(target, accumulation):
    return writer_for(target).accumulate(folding(target, accumulation), None)


def delta_sql(rows):
    values = ", ".join(f"({k}, {'null' if v is None else repr(v)}, {w})" for k, v, w in rows)
    return f"select k, v, _dyn_weight from values {values} as d(k, v, _dyn_weight)"


def test_bag_semantics_delete_one_of_two_copies_and_insert_duplicates(engine, dt, staging):
    target = Target(engine, dt)
    prepared = prepare(target, delta_sql([(1, "a", -1), (2, None, 1), (4, "d", 2)]), COLUMNS)
    assert apply_delta(target, prepared) == (3, 1)
    assert contents(engine, dt) == Counter({(1, "a"): 1, (2, None): 2, (3, "c"): 1, (4, "d"): 2})
    assert last_commit(engine, dt)["operation"] == "MERGE" and written_here(engine, dt)


def test_insert_only_delta_is_one_commit(engine, dt):
    target = Target(engine, dt)
    before = version(engine, dt)
    apply_delta(target, prepare(target, delta_sql([(5, "e", 1), (1, "a", 1)]), COLUMNS))
    assert version(engine, dt) == before + 1
    assert contents(engine, dt)[(1, "a")] == 3
    assert written_here(engine, dt)


def test_writes_keep_a_checkpoint_every_ten_versions_whoever_writes(engine, dt):
    """The engines checkpoint a table every 10 versions (Delta's default); rows written by this
    process (``Capabilities.merge_in_process``) must too, or every reader of the DT replays up to
    deltalake's 100 commits."""
    target = Target(engine, dt)
    start = version(engine, dt)
    for i in range(11):
        apply_delta(target, prepare(target, delta_sql([(100 + i, "n", 1)]), COLUMNS))
    location = engine.table_location(dt.schema, dt.identifier)
    tenth = next(v for v in range(start + 1, start + 12) if v % 10 == 0)
    assert (Path(location) / "_delta_log" / f"{tenth:020d}.checkpoint.parquet").exists()
    assert contents(engine, dt)[(105, "n")] == 1 and written_here(engine, dt)


def test_appended_delta_stays_in_the_engine_and_counts_its_rows(engine, dt):
    """An insert-only delta appended by one INSERT ... SELECT: a row of weight n goes in n times,
    nulls included, and the rows inserted come from the DT's log."""
    target = Target(engine, dt)
    before = version(engine, dt)
    assert append(target, delta_sql([(5, "e", 1), (1, "a", 3), (2, None, 2)]), COLUMNS) == (6, 0)
    assert version(engine, dt) == before + 1
    assert contents(engine, dt) == Counter({(1, "a"): 5, (2, None): 3, (3, "c"): 1, (5, "e"): 1})


def test_an_appended_row_of_weight_below_one_fails_and_leaves_the_dt(engine, dt):
    target = Target(engine, dt)
    before, held = version(engine, dt), contents(engine, dt)
    with pytest.raises(DeltaValidationError, match="an appended row has a weight below 1"):
        append(target, delta_sql([(5, "e", 1), (6, "f", 0)]), COLUMNS)
    assert (version(engine, dt), contents(engine, dt)) == (before, held)


def test_an_append_staged_here_refuses_a_weight_below_one_and_leaves_the_dt(engine, dt):
    """An append that comes to this process (the change fuse counts it, or ``immutable_where``
    filters it) is checked as the engine's INSERT checks it: the plan proves its weights
    positive, so a negative one is a bug, and appending it would drop rows silently."""
    target = Target(engine, dt)
    before, held = version(engine, dt), contents(engine, dt)
    with pytest.raises(DeltaValidationError, match="an appended row has a weight below 1"):
        prepare(target, delta_sql([(5, "e", 1), (1, "a", -1)]), COLUMNS, insert_only=True)
    assert (version(engine, dt), contents(engine, dt)) == (before, held)


def test_an_appended_delta_of_no_rows_inserts_none(engine, dt):
    target = Target(engine, dt)
    held = contents(engine, dt)
    assert append(target, delta_sql([(9, "z", 1)]) + " where false", COLUMNS) == (0, 0)
    assert contents(engine, dt) == held


def test_a_delta_of_no_rows_staged_here_changes_nothing(engine, dt, staging):
    """A delta whose rows all cancelled (a source changed in a column the DT does not read): its
    staging has no rows to infer the view's columns from, and must not fail for it."""
    target = Target(engine, dt)
    before, held = version(engine, dt), contents(engine, dt)
    prepared = prepare(target, delta_sql([(1, "a", -1)]) + " where false", COLUMNS)
    assert (prepared.inserted, prepared.deleted) == (0, 0)
    apply_delta(target, prepared)
    assert contents(engine, dt) == held and version(engine, dt) >= before


def test_deleting_a_row_that_is_not_there_fails_and_leaves_the_dt(engine, dt, staging):
    target = Target(engine, dt)
    before = (version(engine, dt), contents(engine, dt))
    with pytest.raises(DeltaValidationError, match="deletes rows the table does not hold"):
        prepare(target, delta_sql([(3, "c", -2)]), COLUMNS)
    with pytest.raises(DeltaValidationError, match="deletes rows the table does not hold"):
        prepare(target, delta_sql([(9, "z", -1), (4, "d", 1)]), COLUMNS)
    assert (version(engine, dt), contents(engine, dt)) == before


def test_unconsolidated_delta_fails_and_leaves_the_dt(engine, dt, staging):
    target = Target(engine, dt)
    before = (version(engine, dt), contents(engine, dt))
    with pytest.raises(DeltaValidationError, match="more than once"):
        prepare(target, delta_sql([(4, "d", 1), (4, "d", 1)]), COLUMNS)
    with pytest.raises(DeltaValidationError, match="weight 0"):
        prepare(target, delta_sql([(4, "d", 0)]), COLUMNS)
    assert (version(engine, dt), contents(engine, dt)) == before


@pytest.fixture
def keyed_dt(engine, request):
    """An aggregate's DT: one row per group key, a sum of doubles stored as the engine added it."""
    schema = schema_for("apply_keyed_", request)
    engine.execute(f"create schema if not exists {schema}")
    engine.execute(f"create table {schema}.dt (k bigint, total double) using delta")
    engine.execute(f"insert into {schema}.dt values (1, 0.1D + 0.2D), (2, 5.0D), (null, 7.0D)")
    table = DynamicTable(
        schema, "dt", "select 1", DynamicTableConfig.from_model("dt", {"target_lag": "1 minute"})
    )
    yield table
    engine.execute(f"drop schema {schema} cascade")


def keyed_delta_sql(rows):
    values = ", ".join(f"({'null' if k is None else k}, {t!r}D, {w})" for k, t, w in rows)
    return f"select k, total, _dyn_weight from values {values} as d(k, total, _dyn_weight)"


def test_keyed_delta_replaces_the_row_under_its_key_despite_float_rounding(engine, keyed_dt, staging):
    """The recomputed old sum (0.3) differs in its last bits from the stored one (0.1 + 0.2):
    matched on the whole row the delete would miss; matched on the group key it replaces it."""
    target = Target(engine, keyed_dt)
    changes = keyed_delta_sql([(1, 0.3, -1), (1, 0.5, 1), (None, 7.0, -1), (3, 1.0, 1)])
    with pytest.raises(DeltaValidationError, match="deletes rows the table does not hold"):
        prepare(target, changes, ["k", "total"])
    prepared = prepare(target, changes, ["k", "total"], key=["k"])
    assert apply_delta(target, prepared) == (2, 2)
    assert Counter(
        map(tuple, engine.execute(f"select k, total from {keyed_dt.relation}").collect())
    ) == Counter({(1, 0.5): 1, (2, 5.0): 1, (3, 1.0): 1})
    assert written_here(engine, keyed_dt)


def test_keyed_delta_that_would_store_a_key_twice_fails_and_leaves_the_dt(engine, keyed_dt, staging):
    target = Target(engine, keyed_dt)
    before = version(engine, keyed_dt)
    with pytest.raises(DeltaValidationError, match=r"1 key\(s\) of \(k\) would hold two rows"):
        prepare(target, keyed_delta_sql([(2, 6.0, 1)]), ["k", "total"], key=["k"])
    with pytest.raises(DeltaValidationError, match="deletes rows the table does not hold"):
        prepare(target, keyed_delta_sql([(9, 1.0, -1)]), ["k", "total"], key=["k"])
    assert version(engine, keyed_dt) == before


def test_a_key_the_dt_already_breaks_is_never_matched_on(engine, keyed_dt, staging):
    """Two stored rows under k = 2: a keyed MERGE deleting one of them would delete both. A key
    the plan proves fails the refresh; a declared one (a unique test the data breaks) falls back to
    whole-row matching, which is right for any multiset, and says so."""
    engine.execute(f"insert into {keyed_dt.relation} values (2, 8.0D)")
    target = Target(engine, keyed_dt)
    before = version(engine, keyed_dt)
    changes = keyed_delta_sql([(2, 8.0, -1), (2, 9.0, 1)])
    with pytest.raises(DeltaValidationError, match="would hold two rows"):
        prepare(target, changes, ["k", "total"], key=["k"])
    assert version(engine, keyed_dt) == before
    prepared = prepare(target, changes, ["k", "total"], key=["k"], declared_by="a unique test on k")
    assert prepared.key is None and "declared by a unique test on k, is not unique" in prepared.warning
    assert apply_delta(target, prepared) == (1, 1)
    assert Counter(
        map(tuple, engine.execute(f"select k, total from {keyed_dt.relation}").collect())
    ) == Counter({(1, 0.1 + 0.2): 1, (2, 5.0): 1, (2, 9.0): 1, (None, 7.0): 1})


def test_a_delta_on_a_proven_key_is_one_merge_checked_by_the_engine(engine, keyed_dt):
    """Per key: a delete and an insert update the stored row (matched on the key, so the stored
    sum's rounding does not matter), a lone delete deletes it, a lone insert adds one; the counts
    come from the commit's metrics, an update being one of each."""
    target = Target(engine, keyed_dt)
    before = version(engine, keyed_dt)
    changes = keyed_delta_sql([(1, 0.3, -1), (1, 0.5, 1), (None, 7.0, -1), (3, 1.0, 1)])
    assert EngineWriter(target).merge_on_key(changes, ["k", "total"], ["k"], None) == (2, 2)
    assert version(engine, keyed_dt) == before + 1
    assert Counter(
        map(tuple, engine.execute(f"select k, total from {keyed_dt.relation}").collect())
    ) == Counter({(1, 0.5): 1, (2, 5.0): 1, (3, 1.0): 1})


@pytest.mark.parametrize("small", [True, False], ids=["small", "large"])
def test_an_accumulation_folds_partials_into_the_stored_groups_in_one_commit(
    engine, keyed_dt, small, monkeypatch
):
    """Partials of inserts: a held group's sum becomes the stored one plus the partial (the NULL
    key matched NULL-safely), a new group is inserted, a NULL partial keeps the stored sum; the
    counts are a MERGE's, an update being one of each. The MERGE is deltalake's, run by this
    process, where the engine allows it (the embedded one), else the engine's; where the engine
    refolds small tables, a DT under ``REFOLDED_BYTES`` is folded by one query and written whole
    (``large``: the threshold at 0, so that the MERGE is tested on every engine)."""
    if not small:
        monkeypatch.setattr(deltalake_writer, "REFOLDED_BYTES", 0)
    rewritten = small and engine.capabilities.refolds_small_tables
    target = Target(engine, keyed_dt)
    before = version(engine, keyed_dt)
    partials = "select k, total from values (2, 1.5D), (null, cast(null as double)), (4, 2.0D) as p(k, total)"
    accumulation = Accumulation(
        partials, ["K"], ["K", "Total"], {"Total": "sum"}
    )  # names as a query spells them
    assert accumulate(target, accumulation) == (3, 2)
    assert version(engine, keyed_dt) == before + 1
    operation = last_commit(engine, keyed_dt)["operation"]
    assert operation == ("WRITE" if rewritten else "MERGE") and written_here(engine, keyed_dt)
    assert contents_keyed(engine, keyed_dt) == Counter(
        {(1, 0.1 + 0.2): 1, (2, 6.5): 1, (None, 7.0): 1, (4, 2.0): 1}
    )
    assert accumulate(target, replace(accumulation, sql=partials + " where false")) == (0, 0)
    assert version(engine, keyed_dt) == before + 1  # no partials: no commit


TWICE, NOT_HELD = r"a key of \(k\) would hold two rows", "deletes rows the table does not hold"


@pytest.mark.parametrize(
    "rows, detail",
    [
        pytest.param([(2, 6.0, 1)], TWICE, id="insert_held"),
        pytest.param([(4, 1.0, 1), (4, 2.0, 1)], TWICE, id="two_inserts"),
        pytest.param([(4, 1.0, 2)], TWICE, id="two_copies"),
        pytest.param([(9, 1.0, -1)], NOT_HELD, id="delete_not_held"),
        pytest.param([(9, 1.0, -1), (9, 2.0, 1)], NOT_HELD, id="update_not_held"),
        pytest.param([(2, 5.0, -2)], NOT_HELD, id="delete_two"),
        pytest.param([(4, 1.0, 0)], "weight 0", id="weight_0"),
    ],
)
def test_a_merge_on_a_proven_key_that_fails_a_check_leaves_the_dt(engine, keyed_dt, rows, detail):
    target = Target(engine, keyed_dt)
    before = (version(engine, keyed_dt), contents_keyed(engine, keyed_dt))
    changes = keyed_delta_sql([(3, 1.0, 1), *rows])  # a valid row beside: nothing is applied
    with pytest.raises(DeltaValidationError, match=detail):
        EngineWriter(target).merge_on_key(changes, ["k", "total"], ["k"], None)
    assert (version(engine, keyed_dt), contents_keyed(engine, keyed_dt)) == before


def test_an_empty_merge_on_a_key_commits_nothing(engine, keyed_dt):
    target = Target(engine, keyed_dt)
    before = version(engine, keyed_dt)
    assert EngineWriter(target).merge_on_key(
        keyed_delta_sql([(9, 1.0, 1)]) + " where false", ["k", "total"], ["k"], None
    ) == (
        0,
        0,
    )
    assert version(engine, keyed_dt) == before


def test_a_global_aggregate_merges_on_no_key(engine, request):
    """A global aggregate's DT holds one row: its delta replaces it (an empty key matches it)."""
    schema = schema_for("apply_global_", request)
    engine.execute(f"create schema if not exists {schema}")
    try:
        engine.execute(f"create table {schema}.dt (n bigint, total double) using delta")
        engine.execute(f"insert into {schema}.dt values (3, 1.5D)")
        table = DynamicTable(
            schema, "dt", "select 1", DynamicTableConfig.from_model("dt", {"target_lag": "1 minute"})
        )
        changes = (
            "select n, total, _dyn_weight from values (3, 1.5D, -1), (5, 4.5D, 1) as d(n, total, _dyn_weight)"
        )
        assert EngineWriter(Target(engine, table)).merge_on_key(changes, ["n", "total"], [], None) == (1, 1)
        assert [tuple(r) for r in engine.execute(f"select n, total from {table.relation}").collect()] == [
            (5, 4.5)
        ]
    finally:
        engine.execute(f"drop schema {schema} cascade")


def contents_keyed(engine, dt):
    return Counter(map(tuple, engine.execute(f"select k, total from {dt.relation}").collect()))


def test_rows_held_are_counted_alike_here_and_by_the_engine(engine, request, monkeypatch):
    """A DT written by the engine (on JVM Spark its timestamps are INT96), holding copies, NULLs,
    0.0 and -0.0, NaN, dates, decimals and bytes, and a second file with a row deleted: what it
    holds of each delta row, matched whole or on a key, is counted alike in this process and by
    the engine (the equality the engine's ``<=>`` join makes)."""
    schema = schema_for("apply_typed_", request)
    engine.execute(f"create schema if not exists {schema}")
    request.addfinalizer(lambda: engine.execute(f"drop schema {schema} cascade"))
    columns = ["k", "at", "day", "amount", "ratio", "raw", "note"]
    engine.execute(
        f"create table {schema}.dt (k int, at timestamp, day date, amount decimal(6,2), ratio double, "
        "raw binary, note string) using delta tblproperties ('delta.enableDeletionVectors' = 'true')"
    )
    stored = [
        "(1, timestamp'2024-03-31 01:30:00.000001', date'2024-02-29', 1.05, 0.0D, X'0100', 'a')",
        "(1, timestamp'2024-03-31 01:30:00.000001', date'2024-02-29', 1.05, 0.0D, X'0100', 'a')",
        "(2, null, null, null, double('NaN'), null, null)",
        "(3, timestamp'1970-01-01 00:00:00', date'1999-12-31', -0.50, -0.0D, X'', 'c')",
    ]
    engine.execute(f"insert into {schema}.dt values {', '.join(stored)}")
    engine.execute(
        f"insert into {schema}.dt values (4, null, null, 2.00, 1.5D, null, 'd'), (5, null, null, null, null, null, 'e')"
    )
    engine.execute(f"delete from {schema}.dt where k = 5")
    dt = DynamicTable(
        schema, "dt", "select 1", DynamicTableConfig.from_model("dt", {"target_lag": "1 minute"})
    )
    delta = (
        "select k, at, day, amount, ratio, raw, note, _dyn_weight from values "
        "(1, timestamp'2024-03-31 01:30:00.000001', date'2024-02-29', 1.05BD, 0.0D, X'0100', 'a', -1), "
        "(2, null, null, null, double('NaN'), null, null, -1), "
        "(3, timestamp'1970-01-01 00:00:00', date'1999-12-31', -0.50BD, 0.0D, X'', 'c', 1), "
        "(4, null, null, 2.00BD, 1.5D, null, 'x', 1), "
        "(5, null, null, null, null, null, 'e', 1), "
        "(6, null, null, null, null, null, null, 1) "
        "as d(k, at, day, amount, ratio, raw, note, _dyn_weight)"
    )

    def staged(here: bool, key):
        counting_held_rows_here(engine, monkeypatch, here)
        monkeypatch.setattr(apply, "BOUNDED_STAGING_BYTES", 0)
        rows = apply._staged(Target(engine, dt), delta, columns, key, True)
        if key is not None:  # the rank within a key: its order among equal weights is the engine's
            ranks = {}
            for row in sorted(rows.to_pylist(), key=lambda row: row[apply.KEY_RANK]):
                ranks.setdefault(tuple(row[c] for c in key), []).append((row[apply.KEY_RANK], row[WEIGHT]))
            for ranked in ranks.values():
                assert [rank for rank, _ in ranked] == list(range(1, len(ranked) + 1))
                assert [weight for _, weight in ranked] == sorted(weight for _, weight in ranked)
            rows = rows.drop_columns([apply.KEY_RANK])
        return sorted(map(str, rows.to_pylist())), [(f.name, f.type) for f in rows.schema]

    for key in (None, ["k"], ["k", "note"], []):
        here, there = staged(True, key), staged(False, key)
        assert here == there, key
    old = dict(zip(range(1, 7), [2, 1, 1, 0, 0, 0]))
    whole_rows = apply._staged(Target(engine, dt), delta, columns, None, True).to_pylist()
    assert {row["k"]: row[apply.OLD] for row in whole_rows} == old
