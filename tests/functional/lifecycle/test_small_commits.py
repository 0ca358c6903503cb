"""A long run of small commits (docs/ARCHITECTURE.md, "Reading sources"): after 10,000 one-row
commits to a source, its DTs refresh incrementally and equal their queries, with the engine and
this process holding a bounded number of files open at once however many commits there are (the
audit's DTs failed with "Too many open files" after 5,891). What it costs is measured by
benchmarks/small_commits.py, not here."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Iterator, List

import pytest
from dbt.tests.util import run_dbt

from tests.functional.adapter.delta import delta_project
from tests.functional.lifecycle.helpers import assert_refreshed, location, raw_events
from tests.functional.sources import one_row_commits, raw_sources

#: Not in the JVM suite's CI subset: the open files it bounds were the embedded engine's (Sail
#: opens a scan's files at once); delta-spark reads them task by task. The full JVM set runs it.

COMMITS = 10_000
#: Files the engine and this process may hold open at once beyond what they held before the
#: refresh: about one scan's worth per refresh (the engine's Capabilities.files_per_scan), never
#: one per commit.
OPEN_FILES = 400

BY_KIND = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}
select kind, count(*) as n, sum(id) as ids from {{ source('raw', 'events') }} group by kind
"""
COPY = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}
select id, kind from {{ source('raw', 'events') }} where id % 2 = 0
"""


def processes() -> List[int]:
    """This process and its children (a JVM engine's driver)."""
    mine = [os.getpid()]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == os.getpid():
                    mine.append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    return mine


def open_files() -> int:
    total = 0
    for pid in processes():
        try:
            total += len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            continue
    return total


class Peak:
    """The most files open at once while it runs, sampled every millisecond."""

    def __init__(self) -> None:
        self.most = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.001):
            self.most = max(self.most, open_files())

    def __enter__(self) -> "Peak":
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture(scope="class")
def raw(project) -> Iterator[str]:
    yield from raw_events(project)


class TestTenThousandSmallCommits:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return delta_project()

    @pytest.fixture(scope="class")
    def models(self):
        return {"by_kind.sql": BY_KIND, "evens.sql": COPY, "sources.yml": raw_sources("events")}

    def test_dts_refresh_incrementally_with_a_bounded_number_of_open_files(
        self, project, raw, dyntable_warehouse
    ):
        run_dbt(["run"])
        one_row_commits(location(project, f"{raw}.events"), 10, COMMITS)
        before = open_files()
        with Peak() as peak:
            run_dbt(["run"])
        assert peak.most - before <= OPEN_FILES, (before, peak.most)
        for model in ("by_kind", "evens"):
            assert_refreshed(project, dyntable_warehouse, model, "INCREMENTAL")
