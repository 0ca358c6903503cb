"""Compaction (docs/ARCHITECTURE.md, "Compaction"): a DT compacts its small files after the
refreshes that wrote them, without a row changing, and nothing downstream of it, or of a source
compacted by its owner, reads more than what changed: every table stays equal to its query and
refreshes incrementally across the compaction.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List

import pytest
from dbt.tests.util import run_dbt
from deltalake import DeltaTable

from dbt.adapters.dyntable.delta_log import DeltaLog, IntervalKind
from dbt.adapters.dyntable.dynamic_table.refresh.compact import COMPACTION_FOLDER
from tests.functional.adapter.delta import delta_project
from tests.functional.dynamic_table.dvs import project_engine
from tests.functional.lifecycle.helpers import assert_refreshed, commits, last, location
from tests.functional.sources import raw_sources

pytestmark = pytest.mark.jvm_ci

# Append-only through a filter: a file per incremental refresh. Compacted at 3 small files.
EVENTS_KEPT = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental', auto_compact=3) }}
select event_id, user_id, amount from {{ source('raw', 'events') }} where amount > 0
"""

# The same, never compacted.
EVENTS_UNCOMPACTED = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental', auto_compact=false) }}
select event_id, user_id, amount from {{ source('raw', 'events') }} where amount > 0
"""

# Downstream of the compacted DT: reads it across its compactions.
PER_USER = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}
select user_id, count(*) as events, sum(amount) as amount from {{ ref('events_kept') }} group by user_id
"""

MODELS = ("events_kept", "events_uncompacted", "per_user")


@pytest.fixture(scope="class")
def raw(project):
    schema = f"{project.test_schema}_raw"
    project.run_sql(f"create schema if not exists {schema}")
    project.run_sql(
        f"create table {schema}.events (event_id bigint, user_id bigint, amount double) using delta"
    )
    project.run_sql(f"insert into {schema}.events values (1, 1, 5.0), (2, 2, -1.0), (3, 1, 7.5)")
    yield schema
    project.run_sql(f"drop schema if exists {schema} cascade")


def live_files(table: Path) -> int:
    return len(DeltaTable(str(table)).file_uris())


def last_commit_actions(table: Path) -> List[dict]:
    lines = commits(table)[-1].read_text().splitlines()
    return [a.get("add") or a.get("remove") for a in map(json.loads, lines) if "add" in a or "remove" in a]


class TestCompaction:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "events_kept.sql": EVENTS_KEPT,
            "events_uncompacted.sql": EVENTS_UNCOMPACTED,
            "per_user.sql": PER_USER,
            "sources.yml": raw_sources("events"),
        }

    def test_a_dt_compacts_its_small_files_and_its_readers_read_only_changes(
        self, project, raw, dyntable_warehouse
    ):
        run_dbt(["run"])
        kept = location(project, f"{project.test_schema}.events_kept")
        uncompacted = location(project, f"{project.test_schema}.events_uncompacted")
        for event_id in range(10, 14):
            project.run_sql(f"insert into {raw}.events values ({event_id}, {event_id % 3}, 1.5)")
            run_dbt(["run"])
            for model in MODELS:
                assert_refreshed(project, dyntable_warehouse, model, "INCREMENTAL")
            if (last(project, dyntable_warehouse, "events_kept").state_message or "").startswith("compacted"):
                break
        else:
            pytest.fail("events_kept was never compacted")
        # A commit that rewrote every file and changed no rows, after the refresh's own.
        actions = last_commit_actions(kept)
        assert actions and not any(a["dataChange"] for a in actions), actions
        assert live_files(kept) == 1
        assert live_files(uncompacted) >= 3
        assert not (last(project, dyntable_warehouse, "events_uncompacted").state_message or "")

        # The downstream DT read the version the refresh produced, before the compaction; its
        # next refresh reads across the compaction only the rows appended since.
        upstream = f"{project.test_schema}.events_kept"
        log = DeltaLog(kept)
        consumed = last(project, dyntable_warehouse, "per_user").source_versions[upstream]
        assert consumed < log.latest_version()
        project.run_sql(f"insert into {raw}.events values (20, 1, 2.0), (21, 2, 3.0)")
        run_dbt(["run"])
        for model in MODELS:
            assert_refreshed(project, dyntable_warehouse, model, "INCREMENTAL")
        read = log.interval(consumed, last(project, dyntable_warehouse, "per_user").source_versions[upstream])
        assert (read.kind, read.added_rows) == (IntervalKind.ADDED_ONLY, 2)

        # Deletes and updates through the compacted files.
        project.run_sql(f"delete from {raw}.events where event_id in (10, 20)")
        project.run_sql(f"update {raw}.events set amount = amount + 1 where user_id = 1")
        run_dbt(["run"])
        for model in MODELS:
            assert_refreshed(project, dyntable_warehouse, model, "INCREMENTAL")

    def test_a_source_compacted_by_its_owner_costs_only_what_changed(self, project, raw, dyntable_warehouse):
        run_dbt(["run"])
        events = location(project, f"{raw}.events")
        consumed = last(project, dyntable_warehouse, "events_kept").source_versions[f"{raw}.events"]
        project.run_sql(f"insert into {raw}.events values (30, 3, 4.0)")
        DeltaTable(str(events)).optimize.compact()
        project.run_sql(f"insert into {raw}.events values (31, 3, 6.0)")
        run_dbt(["run"])
        for model in MODELS:
            assert_refreshed(project, dyntable_warehouse, model, "INCREMENTAL")
        row = last(project, dyntable_warehouse, "events_kept")
        assert row.rows_inserted == 2 and row.rows_deleted == 0
        read = DeltaLog(events).interval(consumed, row.source_versions[f"{raw}.events"])
        assert (read.added_rows, read.removed_rows) == (2, 0)


# Partitioned, of several types, and built from far more rows than each refresh appends: the first
# build's files are larger than the appended ones together, and outlive the compaction.
EVENTS_BY_BUCKET = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental',
          auto_compact=3, partition_by=['bucket']) }}
select event_id, user_id, amount, event_id % 2 as bucket,
       cast(amount as decimal(12, 2)) as price, concat('user ', cast(user_id as string)) as label,
       date_add(date '2026-01-01', cast(user_id as int)) as day,
       cast(date_add(date '2026-01-01', cast(user_id as int)) as timestamp) as at
from {{ source('raw', 'events') }}
"""


class TestCompactionLeavesLargeFilesAlone:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        return {"events_by_bucket.sql": EVENTS_BY_BUCKET, "sources.yml": raw_sources("events")}

    def test_only_the_appended_files_are_merged(self, project, raw, dyntable_warehouse):
        rows = ", ".join(f"({i}, {i % 7}, {i * 1.5})" for i in range(100, 3_100))
        project.run_sql(f"insert into {raw}.events values {rows}")
        run_dbt(["run"])
        table = location(project, f"{project.test_schema}.events_by_bucket")
        built = set(DeltaTable(str(table)).file_uris())
        # What a compaction in this process killed while writing its merged file leaves behind:
        # readers skip it, and the next such compaction deletes it.
        leftover = table / f"{COMPACTION_FOLDER}crashed" / "0"
        leftover.mkdir(parents=True)
        (leftover / "part-0.parquet").write_bytes(b"not parquet")
        for event_id in range(10_000, 10_010, 2):  # bucket 0 only
            project.run_sql(f"insert into {raw}.events values ({event_id}, 1, 2.5)")
            run_dbt(["run"])
            row = assert_refreshed(project, dyntable_warehouse, "events_by_bucket", "INCREMENTAL")
            if (row.state_message or "").startswith("compacted"):
                break
        else:
            pytest.fail("events_by_bucket was never compacted")
        assert row.state_message.startswith("compacted 3 small files"), row.state_message
        actions = last_commit_actions(table)
        assert actions and not any(a["dataChange"] for a in actions), actions
        added = [a for a in actions if "modificationTime" in a]
        assert len(added) == 1 and added[0]["partitionValues"] == {"bucket": "0"}, added
        # The first build's files are all still live; the three appended ones became one.
        live = set(DeltaTable(str(table)).file_uris())
        assert built <= live and len(live) == len(built) + 1, (built, live)
        in_process = project_engine(project).capabilities.merge_in_process
        assert leftover.exists() is not in_process

        # Updates and deletes through the merged file and the build's.
        project.run_sql(f"delete from {raw}.events where event_id in (10000, 100)")
        project.run_sql(f"update {raw}.events set amount = amount + 1 where user_id = 1")
        run_dbt(["run"])
        assert_refreshed(project, dyntable_warehouse, "events_by_bucket", "INCREMENTAL")
