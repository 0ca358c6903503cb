"""The project's DTs refreshed by a DynamicTableService in this process (built from the project as
`dyntable` builds them), each round one metadata batch as a runner tick is, as refresh_vs_full.py
does: the figures beside which the `dbt run` and `dyntable run` ones show what a process costs."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from benchmarks.dbt_project import in_process_service
from benchmarks.fact_project import FactProject, FactWriter
from benchmarks.user_cost.history import measure_history
from benchmarks.user_cost.parameters import (
    AFTER_ONE,
    DBT_RUNS,
    IN_PROCESS_NO_DATA_ROUNDS,
    INSERTED,
    SWEEP_FRACTION,
)
from benchmarks.user_cost.recorder import Recorder
from benchmarks.user_cost.results import Measure

if TYPE_CHECKING:
    from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService
    from dbt.adapters.dyntable.runner.graph import GraphNode


class Rounds:
    """Rounds of refreshes of the project's DTs, each round at one data timestamp in one batch."""

    def __init__(
        self,
        recorder: Recorder,
        project: FactProject,
        service: "DynamicTableService",
        nodes: Dict[str, "GraphNode"],
    ) -> None:
        self.recorder, self.project, self.service, self.nodes = recorder, project, service, nodes

    def refresh(self, model: str, data_timestamp: datetime) -> Tuple[str, float]:
        """One DT refreshed: its action and wall seconds."""
        from dbt.adapters.dyntable.dynamic_table.lifecycle import RefreshRequest, Trigger

        wall = time.perf_counter()
        result = self.service.refresh(self.nodes[model].dt, RefreshRequest(data_timestamp, Trigger.MANUAL))
        wall = time.perf_counter() - wall
        if str(result.state) != "SUCCEEDED":
            raise RuntimeError(f"in-process {model}: {result.action} {result.state}: {result.message}")
        return str(result.action), wall

    def round_of(self, run: str, models: List[str], record: bool = True) -> None:
        """One tick: the models in one metadata batch, as `dyntable run` refreshes them."""
        data_timestamp = datetime.now(timezone.utc)
        with self.service.batch():
            refreshed = [(model, *self.refresh(model, data_timestamp)) for model in models]
        if not record:
            return
        for model, action, wall in refreshed:
            self.recorder.results.measures.append(
                Measure(
                    self.project.engine,
                    self.project.rows,
                    "in-process",
                    run,
                    AFTER_ONE,
                    model,
                    action,
                    wall,
                )
            )


def measure_in_process(
    recorder: Recorder, project: FactProject, writer: FactWriter, history_refreshes: Optional[int]
) -> None:
    """NO_DATA, INCREMENTAL and the sweep in-process; then the history phase, unless
    ``history_refreshes`` is None."""
    with in_process_service(project) as (loaded, service):
        rounds = Rounds(recorder, project, service, {n.model: n for n in loaded.nodes})
        # In dbt's order (by name: each FULL twin before its DT), as the `dbt run` columns beside
        # these: the first refresh after an insert pays this process's first read of the fact's
        # new version (about 25 ms at 1M rows), whichever of the two it is.
        dts = sorted(project.dynamic_tables)
        # Warm-up, as in refresh_vs_full.py, where every DT was created by the process timing it.
        writer.insert(INSERTED)
        rounds.round_of("warm-up", dts, record=False)
        for _ in range(IN_PROCESS_NO_DATA_ROUNDS):
            rounds.round_of("no-data", dts)
        sweep_rows = int(project.rows * SWEEP_FRACTION)
        # The full twins only where this is the sweep's point too; else they refresh in the sweep.
        for _ in range(DBT_RUNS):
            writer.insert(INSERTED)
            rounds.round_of(
                "incremental", dts if sweep_rows == INSERTED else [m for m in dts if "_incremental" in m]
            )
        if sweep_rows != INSERTED:
            for _ in range(DBT_RUNS):
                writer.insert(sweep_rows)
                rounds.round_of("sweep", dts)
        recorder.say(project, "in-process refreshes done")
        if history_refreshes is not None:
            measure_history(recorder, project, writer, service, loaded, history_refreshes)
