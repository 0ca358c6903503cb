"""Rewritten inputs (docs/ARCHITECTURE.md, "Rewritten inputs"): a `table` model rebuilt by every
run, a seed reloaded, a DT that recomputed, a source compacted or rewritten for a few rows. Each
shows its readers every row removed and added again; they must see only the rows that differ
(none: NO_DATA; a few: INCREMENTAL), a recompute must write only the rows that differ, and every
table must still equal its query at its data timestamp.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List

import pytest
from dbt.tests.util import run_dbt, write_file
from deltalake import DeltaTable, write_deltalake

from dbt.adapters.dyntable import data_files
from dbt.adapters.dyntable.dynamic_table.refresh import write
from tests.functional.adapter.delta import delta_project
from tests.functional.lifecycle.helpers import assert_refreshed, commits, location
from tests.functional.sources import raw_sources

pytestmark = pytest.mark.jvm_ci

DEVICES = """device_id,site,region
1,a,north
2,a,north
3,b,south
4,c,south
5,c,south
6,d,west
"""

DIM_DEVICES = """
{{ config(materialized='table') }}
select device_id, site, region from {{ ref('devices') }}
"""

# A source joined to the table model: the DT the users saw recompute at every run.
ENRICHED = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}
select r.reading_id, r.device_id, r.temp, d.site, d.region
from {{ source('raw', 'readings') }} as r join {{ ref('dim_devices') }} as d on r.device_id = d.device_id
"""

# Another DT over the table model: the rebuilt model's change is measured once for both.
SITES = """
{{ config(materialized='dynamic_table', target_lag='1 minute') }}
select site, count(*) as devices from {{ ref('dim_devices') }} group by site
"""

# A DT over that DT.
SITE_TOTALS = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}
select site, count(*) as readings, sum(temp) as temp from {{ ref('enriched') }} group by site
"""

# A DT over the seed itself.
DEVICES_BY_REGION = """
{{ config(materialized='dynamic_table', target_lag='1 minute') }}
select region, count(*) as devices from {{ ref('devices') }} group by region
"""

# Always recomputed: what it writes is the difference.
BUSY_SITES = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='full') }}
select site, readings from {{ ref('site_totals') }} where readings >= 10
"""

# Downstream of the recomputed DT: reads its changes.
BUSY_SCORES = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}
select site, readings * 10 as score from {{ ref('busy_sites') }}
"""

# A projection of a source with deletion vectors.
WARM_READINGS = """
{{{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='{mode}') }}}}
select reading_id, device_id, temp * 2 as temp2 from {{{{ source('raw', 'readings') }}}} where temp > 0
"""

MODELS = ("enriched", "sites", "site_totals", "devices_by_region", "busy_sites", "busy_scores")


@pytest.fixture(scope="class")
def raw(project):
    schema = f"{project.test_schema}_raw"
    project.run_sql(f"create schema if not exists {schema}")
    project.run_sql(
        f"create table {schema}.readings (reading_id bigint, device_id bigint, temp double) using delta"
    )
    project.run_sql(
        f"insert into {schema}.readings select id, id % 6 + 1, cast(id % 7 as double) from range(40)"
    )
    yield schema
    project.run_sql(f"drop schema if exists {schema} cascade")


def operations(table: Path, since: int) -> List[str]:
    """The operations of the table's commits after the first ``since``."""
    return [
        json.loads(path.read_text().splitlines()[0]).get("commitInfo", {}).get("operation", "")
        for path in commits(table)[since:]
    ]


class TestRewrittenInputs:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def seeds(self):
        return {"devices.csv": DEVICES}

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "dim_devices.sql": DIM_DEVICES,
            "enriched.sql": ENRICHED,
            "sites.sql": SITES,
            "site_totals.sql": SITE_TOTALS,
            "devices_by_region.sql": DEVICES_BY_REGION,
            "busy_sites.sql": BUSY_SITES,
            "busy_scores.sql": BUSY_SCORES,
            "sources.yml": raw_sources("readings"),
        }

    def build(self, project, warehouse):
        """Every test starts from freshly built tables and the original seed."""
        write_file(DEVICES, project.project_root, "seeds", "devices.csv")
        run_dbt(["build", "--full-refresh"])
        for model in MODELS:
            assert_refreshed(project, warehouse, model, "REINITIALIZE")

    def test_rebuilt_with_the_same_rows_is_no_data(self, project, raw, dyntable_warehouse):
        self.build(project, dyntable_warehouse)
        enriched = location(project, f"{project.test_schema}.enriched")
        written = len(commits(enriched))
        run_dbt(["build"])  # the seed reloaded, the table model rebuilt: the same rows
        row = assert_refreshed(
            project, dyntable_warehouse, "enriched", "NO_DATA", "dim_devices was rewritten", "the same rows"
        )
        assert len(commits(enriched)) == written  # nothing written
        assert row.source_versions[f"{project.test_schema}.dim_devices"] > 0
        sites = assert_refreshed(
            project, dyntable_warehouse, "sites", "NO_DATA", "dim_devices was rewritten", "the same rows"
        )
        # The first of the two DTs over the model read both versions of its files; the second
        # took that measurement as this process had made it, and read nothing.
        assert sorted([row.source_rows_read, sites.source_rows_read]) == [0, 2 * 6]
        assert_refreshed(project, dyntable_warehouse, "devices_by_region", "NO_DATA", "devices was rewritten")
        for model in ("site_totals", "busy_sites", "busy_scores"):
            assert_refreshed(project, dyntable_warehouse, model, "NO_DATA")

    def test_a_seed_reloaded_keeps_its_table_and_history(self, project, raw, dyntable_warehouse):
        self.build(project, dyntable_warehouse)
        seed = location(project, f"{project.test_schema}.devices")
        history = [path.read_bytes() for path in commits(seed)]
        run_dbt(["seed"])
        reloaded = [path.read_bytes() for path in commits(seed)]
        assert reloaded[: len(history)] == history and len(reloaded) > len(history)  # its log goes on
        run_dbt(["seed", "--full-refresh"])  # asked for: dropped and created anew
        assert commits(seed)[0].read_bytes() != history[0]

    def test_a_few_rows_changed_upstream_are_all_that_is_read(self, project, raw, dyntable_warehouse):
        self.build(project, dyntable_warehouse)
        # Device 6 moves from site d to site a: the seed and the table model are rewritten, and
        # one device's readings move between sites.
        write_file(DEVICES.replace("6,d,west", "6,a,west"), project.project_root, "seeds", "devices.csv")
        run_dbt(["build"])
        row = assert_refreshed(
            project,
            dyntable_warehouse,
            "enriched",
            "INCREMENTAL",
            "dim_devices was rewritten",
            "1 row(s) added and 1 removed",
        )
        readings_of_device_6 = 40 // 6
        assert (row.rows_inserted, row.rows_deleted) == (readings_of_device_6, readings_of_device_6)
        site_totals = assert_refreshed(project, dyntable_warehouse, "site_totals", "INCREMENTAL")
        assert site_totals.rows_deleted == 2  # sites a and d changed; d is gone
        # The seed's change is in a column the regional count does not read.
        assert_refreshed(
            project, dyntable_warehouse, "devices_by_region", "NO_DATA", "in columns it does not read"
        )
        for model in ("busy_sites", "busy_scores"):
            assert_refreshed(project, dyntable_warehouse, model, ("INCREMENTAL", "FULL", "NO_DATA"))

    def test_a_change_only_in_columns_a_dt_does_not_read_is_no_change_to_it(
        self, project, raw, dyntable_warehouse
    ):
        self.build(project, dyntable_warehouse)
        # Device 6 moves to another region, on the same site: the DTs that read only sites and
        # readings see no change in what they read.
        write_file(DEVICES.replace("6,d,west", "6,d,east"), project.project_root, "seeds", "devices.csv")
        run_dbt(["build"])
        row = assert_refreshed(
            project, dyntable_warehouse, "enriched", "INCREMENTAL", "1 row(s) added and 1 removed"
        )
        readings_of_device_6 = 40 // 6
        assert (row.rows_inserted, row.rows_deleted) == (readings_of_device_6, readings_of_device_6)
        assert_refreshed(
            project,
            dyntable_warehouse,
            "sites",
            "NO_DATA",
            "dim_devices was rewritten",
            "1 row(s) added and 1 removed, in columns it does not read",
        )
        assert_refreshed(project, dyntable_warehouse, "devices_by_region", ("INCREMENTAL", "FULL"))
        # enriched's rows of device 6 replaced, their site and temp as before.
        assert_refreshed(project, dyntable_warehouse, "site_totals", "NO_DATA", "in columns it does not read")
        for model in ("busy_sites", "busy_scores"):
            assert_refreshed(project, dyntable_warehouse, model, "NO_DATA")

    def test_a_rewrite_too_large_to_compare_here_is_compared_by_the_engine(
        self, project, raw, dyntable_warehouse, monkeypatch
    ):
        # Every table counts as too large to read in this process: one engine job compares a
        # rewrite, and its rows come back in the table's types, with the same outcome.
        monkeypatch.setattr(data_files, "IN_PROCESS_MAX_BYTES", 0)
        self.test_a_few_rows_changed_upstream_are_all_that_is_read(project, raw, dyntable_warehouse)

    def test_a_recompute_that_changes_nothing_writes_nothing(self, project, raw, dyntable_warehouse):
        self.build(project, dyntable_warehouse)
        busy = location(project, f"{project.test_schema}.busy_sites")
        written = len(commits(busy))
        # A reading of a site with fewer than 10 readings (d) changes site_totals, not busy_sites.
        project.run_sql(f"insert into {raw}.readings values (100, 6, 1.0)")
        run_dbt(["run"])
        assert_refreshed(project, dyntable_warehouse, "site_totals", "INCREMENTAL")
        row = assert_refreshed(project, dyntable_warehouse, "busy_sites", "FULL")
        assert "its result did not change" in (row.state_message or ""), row
        assert len(commits(busy)) == written
        assert_refreshed(project, dyntable_warehouse, "busy_scores", "NO_DATA")

    def test_a_recompute_that_changes_a_few_rows_writes_only_those(self, project, raw, dyntable_warehouse):
        self.build(project, dyntable_warehouse)
        busy = location(project, f"{project.test_schema}.busy_sites")
        written = len(commits(busy))
        project.run_sql(f"insert into {raw}.readings values (101, 1, 2.0)")  # site a: one more
        run_dbt(["run"])
        row = assert_refreshed(project, dyntable_warehouse, "busy_sites", "FULL")
        assert "wrote only the rows that differ" in (row.state_message or ""), row
        assert (row.rows_inserted, row.rows_deleted) == (1, 1)
        assert operations(busy, written) == ["MERGE"]  # one commit, not an overwrite
        assert_refreshed(project, dyntable_warehouse, "busy_scores", "INCREMENTAL")

    def test_a_source_compacted_or_rewritten_with_the_same_rows_is_no_data(
        self, project, raw, dyntable_warehouse
    ):
        self.build(project, dyntable_warehouse)
        readings = location(project, f"{raw}.readings")
        project.run_sql(f"insert into {raw}.readings values (102, 2, 3.0)")
        run_dbt(["run"])
        DeltaTable(str(readings)).optimize.compact()  # rows unchanged, marked so
        run_dbt(["run"])
        assert_refreshed(project, dyntable_warehouse, "enriched", "NO_DATA", "readings was rewritten")
        # A rewrite that does not say its rows are unchanged (a copy by another tool).
        project.run_sql(f"insert overwrite {raw}.readings select * from {raw}.readings")
        run_dbt(["run"])
        assert_refreshed(project, dyntable_warehouse, "enriched", "NO_DATA", "readings was rewritten")
        for model in ("site_totals", "busy_sites", "busy_scores"):
            assert_refreshed(project, dyntable_warehouse, model, "NO_DATA")

    def test_one_row_updated_in_a_big_file_is_read_as_one_row(self, project, raw, dyntable_warehouse):
        self.build(project, dyntable_warehouse)
        readings = location(project, f"{raw}.readings")
        table = DeltaTable(str(readings))
        rows = table.to_pyarrow_table()
        write_deltalake(str(readings), rows, mode="overwrite")  # one file of every row
        run_dbt(["run"])
        assert_refreshed(project, dyntable_warehouse, "enriched", "NO_DATA")
        DeltaTable(str(readings)).update(predicate="reading_id = 7", updates={"temp": "99.0"})
        run_dbt(["run"])
        row = assert_refreshed(
            project, dyntable_warehouse, "enriched", "INCREMENTAL", "1 row(s) added and 1 removed"
        )
        assert (row.rows_inserted, row.rows_deleted) == (1, 1)
        assert_refreshed(project, dyntable_warehouse, "site_totals", "INCREMENTAL")

    def test_a_large_dt_changed_by_a_recompute_leaves_its_readers_only_the_changed_rows(
        self, project, raw, dyntable_warehouse, monkeypatch
    ):
        # Every DT counts as large: the engine deletes its rows in deletion vectors.
        monkeypatch.setattr(write, "MASKED_BYTES", 0)
        self.build(project, dyntable_warehouse)
        busy = location(project, f"{project.test_schema}.busy_sites")
        written = len(commits(busy))
        project.run_sql(f"insert into {raw}.readings values (103, 1, 2.0)")  # site a: one more
        run_dbt(["run"])
        row = assert_refreshed(project, dyntable_warehouse, "busy_sites", "FULL")
        assert "wrote only the rows that differ" in (row.state_message or ""), row
        actions = [
            json.loads(line) for path in commits(busy)[written:] for line in path.read_text().splitlines()
        ]
        assert any((a.get("add") or {}).get("deletionVector") for a in actions), actions
        row = assert_refreshed(project, dyntable_warehouse, "busy_scores", "INCREMENTAL")
        # The masked row and the row added: not the files holding them.
        assert (row.source_rows_read, row.source_files_read) == (2, 2)


class TestTableModelsWithoutFileFormat:
    """A project that sets no `file_format` (dbt-spark's materializations then dropped a `table`
    model and created it anew at every run, and every DT reading it rebuilt)."""

    @pytest.fixture(scope="class")
    def seeds(self):
        return {"devices.csv": DEVICES}

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "dim_devices.sql": DIM_DEVICES,
            "enriched.sql": ENRICHED,
            "sources.yml": raw_sources("readings"),
        }

    def test_a_table_model_is_replaced_in_place(self, project, raw, dyntable_warehouse):
        run_dbt(["build"])
        assert_refreshed(project, dyntable_warehouse, "enriched", "REINITIALIZE")
        dim_devices = location(project, f"{project.test_schema}.dim_devices")
        first = commits(dim_devices)[0].read_bytes()
        run_dbt(["build"])  # the seed reloaded, the table model rebuilt: the same rows
        assert commits(dim_devices)[0].read_bytes() == first  # the same table, its log goes on
        assert len(commits(dim_devices)) > 1
        assert_refreshed(project, dyntable_warehouse, "enriched", "NO_DATA", "dim_devices was rewritten")


class TestUpdatesMarkedByDeletionVectors:
    """A source with deletion vectors, in files of thousands of rows: the engine's UPDATE of one
    row masks it in its file and writes the new row to a file of its own."""

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def dv_raw(self, project):
        schema = f"{project.test_schema}_raw"
        project.run_sql(f"create schema if not exists {schema}")
        project.run_sql(
            f"create table {schema}.readings (reading_id bigint, device_id bigint, temp double) using delta "
            "tblproperties ('delta.enableDeletionVectors' = 'true')"
        )
        project.run_sql(
            f"insert into {schema}.readings select id, id % 6 + 1, cast(id % 7 as double) from range(20000)"
        )
        yield schema
        project.run_sql(f"drop schema if exists {schema} cascade")

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "sources.yml": raw_sources("readings"),
            "warm_readings.sql": WARM_READINGS.format(mode="incremental"),
            "warm_readings_auto.sql": WARM_READINGS.format(mode="auto"),
        }

    def test_one_row_updated_is_read_as_two_rows_and_refreshed_incrementally(
        self, project, dv_raw, dyntable_warehouse
    ):
        run_dbt(["run"])
        readings = location(project, f"{dv_raw}.readings")
        project.run_sql(f"update {dv_raw}.readings set temp = 99.0 where reading_id = 8")
        masked = [
            json.loads(line)["add"]
            for line in commits(readings)[-1].read_text().splitlines()
            if '"add"' in line and "deletionVector" in line
        ]
        assert masked, "the engine's UPDATE wrote no deletion vector"
        run_dbt(["run"])
        row = assert_refreshed(project, dyntable_warehouse, "warm_readings", "INCREMENTAL")
        assert (row.rows_inserted, row.rows_deleted) == (1, 1)
        assert row.source_rows_read == 2, row  # the masked row and the new one
        # Neither measured as a rewrite of the file: AUTO prices the change at its two rows.
        for model in ("warm_readings", "warm_readings_auto"):
            row = assert_refreshed(project, dyntable_warehouse, model, "INCREMENTAL")
            assert "was rewritten" not in (row.reason or ""), row
