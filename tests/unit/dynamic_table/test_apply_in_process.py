"""The MERGE this process runs with deltalake where the engine allows it (docs/ARCHITECTURE.md,
"Applying"): which DTs it may write, and its Spark SQL as DataFusion reads it."""

from __future__ import annotations

import json
from datetime import date, datetime

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from dbt.adapters.dyntable.delta_log import Snapshot
from dbt.adapters.dyntable.dynamic_table.refresh.apply import BOUND_VALUES, key_bounds
from dbt.adapters.dyntable.dynamic_table.refresh.deltalake_writer import datafusion_sql
from dbt.adapters.dyntable.dynamic_table.refresh.write import writable_in_process
from dbt.adapters.dyntable.engines.jvm import reads_may_be_stale


def snapshot(configuration=None, writer_features=(), column_type="long", min_writer_version=2):
    schema = {
        "type": "struct",
        "fields": [{"name": "k", "type": column_type, "nullable": True, "metadata": {}}],
    }
    return Snapshot(
        version=3,
        table_id="t",
        schema_json=json.dumps(schema),
        partition_columns=(),
        configuration=configuration or {},
        files={},
        writer_features=writer_features,
        min_writer_version=min_writer_version,
    )


def test_a_plain_dt_is_merged_in_process():
    assert writable_in_process(snapshot({"delta.checkpointInterval": "10"}))
    assert writable_in_process(snapshot(min_writer_version=7))  # table features, none listed


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param({"writer_features": ("clustering", "domainMetadata")}, id="table_features"),
        pytest.param({"configuration": {"delta.columnMapping.mode": "name"}}, id="column_mapping"),
        pytest.param(
            {"configuration": {"delta.enableChangeDataFeed": "true"}, "min_writer_version": 4},
            id="change_data_feed_by_writer_version",
        ),
        pytest.param({"min_writer_version": 6}, id="identity_columns_by_writer_version"),
        pytest.param({"configuration": {"delta.constraints.positive": "k > 0"}}, id="check_constraint"),
        pytest.param(
            {"column_type": {"type": "array", "elementType": "long", "containsNull": True}},
            id="nested_column",
        ),
    ],
)
def test_a_dt_using_what_deltalake_might_not_keep_keeps_the_engines_merge(changed):
    assert not writable_in_process(snapshot(**changed))


def test_conditions_become_datafusion_each_conjunct_parenthesized():
    """DataFusion binds AND tighter than IS NOT DISTINCT FROM: unparenthesized, the second key's
    column would be AND-ed with the first's."""
    assert (
        datafusion_sql("t.`k` <=> s.`k` AND t.`Order Month` <=> s.`Order Month`")
        == '(t."k" IS NOT DISTINCT FROM s."k") AND (t."Order Month" IS NOT DISTINCT FROM s."Order Month")'
    )
    assert datafusion_sql("t.`k` <=> s.`k`") == 't."k" IS NOT DISTINCT FROM s."k"'


def test_names_and_folds_keep_their_spelling():
    assert datafusion_sql("`Total`") == '"Total"'
    assert datafusion_sql("s.`a``b`") == 's."a`b"'
    assert (
        datafusion_sql(
            "CASE WHEN t.`m` IS NULL THEN s.`m` WHEN s.`m` IS NULL THEN t.`m` ELSE LEAST(t.`m`, s.`m`) END"
        )
        == 'CASE WHEN t."m" IS NULL THEN s."m" WHEN s."m" IS NULL THEN t."m" ELSE LEAST(t."m", s."m") END'
    )


@pytest.mark.parametrize(
    ("limit", "stale"),
    [
        (None, False),
        ("0", False),
        ("0s", False),
        ("0 ms", False),
        ("1h", True),
        ("500ms", True),
        ("10 minutes", True),
    ],
)
def test_a_delta_staleness_limit_keeps_jvm_spark_writing_its_dts(limit, stale):
    """Under ``spark.databricks.delta.stalenessLimit`` a statement may read a snapshot older than a
    commit made here, so the session engine then writes the DTs itself."""
    assert reads_may_be_stale(limit) is stale


def test_key_bounds_list_few_values_and_bound_many_by_their_range():
    few = pa.table({"k": pa.array([3, 1, 3], pa.int64()), "d": pa.array([date(2026, 1, 2)] * 3)})
    assert key_bounds(few, ["k", "d"], "t") == ["t.`k` IN (3, 1)", "t.`d` IN (DATE '2026-01-02')"]
    many = pa.table({"k": pa.array([*range(BOUND_VALUES + 1), None], pa.int32())})
    assert key_bounds(many, ["k"], "t") == [f"(t.`k` BETWEEN 0 AND {BOUND_VALUES} OR t.`k` IS NULL)"]
    assert key_bounds(pa.table({"k": pa.array([None], pa.int64())}), ["k"], "t") == ["t.`k` IS NULL"]


def test_key_bounds_leave_out_types_whose_file_statistics_may_not_bound_them():
    """Strings (statistics truncated by some writers), floats (NaN), timestamps (time zones)."""
    rows = pa.table({"s": ["a"], "f": [1.5], "ts": pa.array([datetime(2026, 1, 1)])})
    assert key_bounds(rows, ["s", "f", "ts"], "t") == []
    assert key_bounds(rows.slice(0, 0), ["s"], "t") == []


def test_a_bounded_merge_deletes_exactly_the_rows_matched_across_files(tmp_path):
    """The MERGE a delta takes, bounded by its deletes' keys: every stored row under a deleted
    key goes (NULL keys included, in whichever file), every other row stays."""
    for first in range(0, 100, 10):
        keys = pa.array([*range(first, first + 10), None], pa.int64())
        write_deltalake(
            tmp_path,
            pa.table({"k": keys, "v": pa.array(range(11), pa.int64())}),
            mode="append",
        )
    stored = DeltaTable(tmp_path).to_pyarrow_table()
    deletes = pa.table({"k": pa.array([*range(40, 40 + BOUND_VALUES + 5), None], pa.int64())})
    on = " AND ".join(["t.`k` <=> s.`k`", *key_bounds(deletes, ["k"], "t")])
    merge = DeltaTable(tmp_path).merge(deletes, datafusion_sql(on), source_alias="s", target_alias="t")
    merge.when_matched_delete().execute()
    left = DeltaTable(tmp_path).to_pyarrow_table().column("k").to_pylist()
    deleted = set(deletes.column("k").to_pylist())
    assert sorted(left) == sorted(k for k in stored.column("k").to_pylist() if k not in deleted)
    assert None not in left and len(left) == stored.num_rows - (BOUND_VALUES + 5) - 10
