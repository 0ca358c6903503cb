"""A source commit stamped ahead of the refreshing machine's clock (its writer's clock runs ahead)
is read once the data timestamp passes its stamp, and the commits after it with it; meanwhile
every refresh says so, in its reason, a warning and `dyntable status`, never a silent stall
(docs/ARCHITECTURE.md, "Reading sources")."""

from __future__ import annotations

import os
import time

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from tests.functional.lifecycle.helpers import (
    EventsProject,
    assert_refreshed,
    commits,
    forget_delta_logs,
    last,
    location,
)
from tests.functional.runner.test_runner import dyntable

pytestmark = pytest.mark.jvm_ci


class TestClockSkew(EventsProject):
    def test_a_commit_stamped_an_hour_ahead_is_reported_then_read_when_its_time_comes(
        self, project, raw, dyntable_warehouse
    ):
        run_dbt(["run"])
        events = location(project, f"{raw}.events")
        project.run_sql(f"insert into {raw}.events values (3, 'a')")
        ahead = time.time() + 3600  # its writer's clock: an hour ahead of this machine's
        skewed = commits(events)[-1]
        os.utime(skewed, (ahead, ahead))
        project.run_sql(f"insert into {raw}.events values (4, 'c')")  # a writer on time, after it
        forget_delta_logs(project)

        _, log = run_dbt_and_capture(["run"])
        text = " ".join(log.split())
        waits = f"{raw}.events: 2 newer commit(s) wait for the data timestamp to pass "
        assert f"dynamic table {project.test_schema}.totals reads {waits}" in text, text[-3000:]
        assert "ahead of this machine's clock (its writer's clock is ahead: fix that machine's clock)" in text
        row = last(project, dyntable_warehouse, "totals")
        assert row.refresh_action == "NO_DATA" and waits in row.reason, row
        status = " ".join(dyntable(project, "status").output.split())
        assert f"totals: no source changed; {waits}" in status, status[-3000:]

        # The hour passes (its stamp is in the past now): both commits are read.
        os.utime(skewed, (time.time() - 10, time.time() - 10))
        forget_delta_logs(project)
        run_dbt(["run"])
        row = assert_refreshed(project, dyntable_warehouse, "totals", ("INCREMENTAL", "FULL"))
        assert "wait for the data timestamp" not in row.reason
        assert sorted(project.run_sql(f"select kind, n from {project.test_schema}.totals", fetch="all")) == [
            ("a", 2),
            ("b", 1),
            ("c", 1),
        ]
