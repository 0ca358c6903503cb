"""What the lifecycle tests do to a warehouse the way users and tools do: reload, drop, re-create,
restore, damage; and what they check afterwards: the semantics contract and the history's reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator, List, Tuple, Union

import pytest
from deltalake import DeltaTable

from dbt.adapters.dyntable.dynamic_table.metadata import FRONTIERS, HistoryRow
from tests.functional.adapter.delta import delta_project
from tests.functional.dynamic_table.dvs import assert_dvs, history, project_engine
from tests.functional.sources import raw_sources

#: The lifecycle tests' usual subject: a DT counting the raw `events` table's rows by kind.
TOTALS = """
{{ config(materialized='dynamic_table', target_lag='1 minute') }}
select kind, count(*) as n from {{ source('raw', 'events') }} group by kind
"""


def raw_events(project: Any) -> Iterator[str]:
    """For a class fixture: the test schema's ``_raw`` sibling holding a Delta table ``events``
    (id, kind) of two rows, dropped with it afterwards."""
    schema = f"{project.test_schema}_raw"
    project.run_sql(f"create schema if not exists {schema}")
    project.run_sql(f"create table {schema}.events (id bigint, kind string) using delta")
    project.run_sql(f"insert into {schema}.events values (1, 'a'), (2, 'b')")
    yield schema
    project.run_sql(f"drop schema if exists {schema} cascade")


class EventsProject:
    """A test class's project: Delta tables by default, the raw ``events`` table (its ``raw``
    fixture names the schema) and the totals DT over it. A class adds models by overriding
    ``models``."""

    @pytest.fixture(scope="class")
    def project_config_update(self) -> Any:
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self) -> Any:
        return {"totals.sql": TOTALS, "sources.yml": raw_sources("events")}

    @pytest.fixture(scope="class")
    def raw(self, project: Any) -> Iterator[str]:
        yield from raw_events(project)


def location(project: Any, name: str) -> Path:
    """Where the Delta table ``schema.table`` keeps its files."""
    schema, table = name.split(".", 1)
    found = project_engine(project).table_location(schema, table)
    assert found is not None, f"{name} has no location"
    return Path(found)


def last(project: Any, warehouse: Path, model: str) -> HistoryRow:
    return history(warehouse, f"{project.test_schema}.{model}")[-1]


def assert_refreshed(
    project: Any, warehouse: Path, model: str, action: Union[str, Tuple[str, ...]], *reason: str
) -> HistoryRow:
    """The model's last refresh took ``action`` (or one of them) with every text of ``reason`` in
    its reason, and the DT equals its query at its data timestamp."""
    row = last(project, warehouse, model)
    assert row.state == "SUCCEEDED", row
    assert row.refresh_action in ((action,) if isinstance(action, str) else action), row
    for text in reason:
        assert text in (row.reason or ""), row
    assert_dvs(project, warehouse, model)
    return row


def commits(table: Path) -> List[Path]:
    return sorted((table / "_delta_log").glob("*.json"))


def drop_last_commits(table: Path, count: int) -> None:
    """Remove a table's newest ``count`` commits, as a storage restore from an older backup
    would: their JSON files, checkpoints after what remains, and the pointer to those."""
    log = table / "_delta_log"
    for commit in commits(table)[-count:]:
        remove_with_checksum(commit)
    kept = int(commits(table)[-1].name.split(".")[0])
    for checkpoint in log.glob("[0-9]*.checkpoint*"):
        if int(checkpoint.name.split(".")[0]) > kept:
            remove_with_checksum(checkpoint)
    # A backup holds the pointer of its own time: none past what remains.
    pointer = log / "_last_checkpoint"
    if pointer.exists() and json.loads(pointer.read_text())["version"] > kept:
        remove_with_checksum(pointer)


def remove_with_checksum(path: Path) -> None:
    """Remove a log file and the checksum JVM Spark's Hadoop file system keeps beside it
    (``.<name>.crc``), which would otherwise reject the next file written under that name."""
    path.unlink()
    path.with_name(f".{path.name}.crc").unlink(missing_ok=True)


def restore(table: Path, version: int) -> None:
    """RESTORE the table to ``version`` (a new commit), as any Delta tool can."""
    DeltaTable(str(table)).restore(version)


def metadata_table(warehouse: Path, table: str = FRONTIERS) -> Path:
    return warehouse / "dyntable_meta" / table


def as_a_new_process(project: Any) -> None:
    """Forget the metadata tables this process holds open, as the next dbt process starts
    without them (dbt runs in the tests' process)."""
    adapter = project.adapter
    with adapter.connection_named("new_process"):
        adapter.connections.environment(adapter.connections.get_thread_connection()).services.clear()


def forget_delta_logs(project: Any) -> None:
    """Forget what this process (and a JVM engine's driver) read of any Delta log, as a new
    process would: a table damaged since is read as it is now."""
    from dbt.adapters.dyntable.delta_log import (
        deltalake_snapshots,
        intervals,
        listing,
        object_listing,
        snapshots,
    )

    for cache in (
        snapshots._shared_snapshots,
        deltalake_snapshots._replay_bases,
        listing._listings,
        snapshots._last_snapshots,
        intervals._shared_intervals,
        object_listing._object_listings,
    ):
        for key in list(cache):
            cache.pop(key)
    engine = project_engine(project)
    if engine.name != "embedded":
        engine.spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    as_a_new_process(project)


def checkpoint(table: Path, before_latest: bool = False) -> int:
    """Write a checkpoint of the table's latest version (or the one before), as any Delta writer
    does every tenth commit; returns its version."""
    opened = DeltaTable(str(table))
    if before_latest:
        opened.load_as_version(opened.version() - 1)
    opened.create_checkpoint()
    return opened.version()
