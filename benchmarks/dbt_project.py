"""A dbt project on disk, run as users run it: through the venv's `dbt` and `dyntable` executables,
each command a subprocess that pays what a user's pays; and the same project's dynamic tables
refreshed inside this process, as `dyntable run` refreshes them.

What several benchmarks share (user_cost, compaction, object_storage): writing the project and its
profile, running its commands, reading each model's result from target/run_results.json and each
refresh from the refresh history.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from copy import copy as shallow_copy
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Any,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
)

if TYPE_CHECKING:
    from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService
    from dbt.adapters.dyntable.runner.graph import GraphNode
    from dbt.adapters.dyntable.runner.project import LoadedProject
    from dbt.adapters.dyntable.runner.scheduler import Outcome

META_SCHEMA = "dyntable_meta"
REFRESH_HISTORY = "dynamic_table_refresh_history"


def dbt_environment() -> Dict[str, str]:
    """This process's environment for a dbt command, without telemetry; with bytecode written."""
    env = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "DO_NOT_TRACK": "1"}
    # An installed package has its bytecode (pip compiles it at install); a checkout installed
    # editable gets it on first import, unless the environment forbids writing it. Forbidden,
    # every dbt process would compile dbt-dyntable's modules again inside its first DT.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


@dataclass
class CommandRun:
    """One command run in the project: its start and wall seconds, and what it printed."""

    started_at: datetime
    wall: float
    stdout: str


@dataclass
class ModelRun:
    """One node's result in target/run_results.json."""

    model: str
    status: str
    #: dbt's message (an error's text where the node failed).
    message: Optional[str]
    #: The adapter's: a dynamic table's starts with its refresh action.
    adapter_message: str
    execution_time: float
    #: When dbt executed the node (its "execute" timing), as run_results.json writes the times.
    execute: Optional[Tuple[str, str]]

    @classmethod
    def from_result(cls, result: Dict[str, Any]) -> "ModelRun":
        timing = next((t for t in result.get("timing", []) if t["name"] == "execute"), None)
        return cls(
            result["unique_id"].split(".")[-1],
            result["status"],
            result.get("message"),
            (result.get("adapter_response") or {}).get("_message") or "",
            result["execution_time"],
            (timing["started_at"], timing["completed_at"]) if timing else None,
        )

    @property
    def execute_window(self) -> Optional[Tuple[datetime, datetime]]:
        """When dbt executed the node, in UTC."""
        if self.execute is None:
            return None
        began, ended = (datetime.fromisoformat(t.replace("Z", "+00:00")) for t in self.execute)
        if began.tzinfo is None:
            began, ended = began.replace(tzinfo=timezone.utc), ended.replace(tzinfo=timezone.utc)
        return began, ended


_Project = TypeVar("_Project", bound="DbtProject")


class DbtProject:
    """A dbt project in ``root`` and its profile ``name``, run against ``target``."""

    def __init__(
        self, root: Path, name: str, target: str, warehouse: str, env: Optional[Dict[str, str]] = None
    ) -> None:
        self.root, self.name, self.target, self.warehouse_url = root, name, target, warehouse
        self.bin = Path(sys.executable).parent
        self.env = env if env is not None else dbt_environment()

    @property
    def warehouse(self) -> Path:
        """The warehouse, where it is a folder on this machine."""
        return Path(self.warehouse_url)

    def write(self, output: Mapping[str, Any], files: Mapping[str, str], project_config: str = "") -> None:
        """dbt_project.yml (with ``project_config`` appended), profiles.yml of the one ``output``,
        and ``files`` (paths under the project → text)."""
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "dbt_project.yml").write_text(
            f"name: {self.name}\nversion: '1.0'\nconfig-version: 2\nprofile: {self.name}\n{project_config}"
        )
        profile = {self.name: {"target": self.target, "outputs": {self.target: dict(output)}}}
        (self.root / "profiles.yml").write_text(json.dumps(profile))
        for path, text in files.items():
            (self.root / path).parent.mkdir(parents=True, exist_ok=True)
            (self.root / path).write_text(text)

    def copy(self: _Project, root: Path) -> _Project:
        """The project and its warehouse copied to ``root``: the same state, run on its own."""
        shutil.copytree(self.root, root, ignore=shutil.ignore_patterns("target", "logs"))
        twin = shallow_copy(self)
        twin.root, twin.warehouse_url = root, str(root / self.warehouse.relative_to(self.root))
        profiles = json.loads((root / "profiles.yml").read_text())
        profiles[self.name]["outputs"][self.target]["warehouse"] = twin.warehouse_url
        (root / "profiles.yml").write_text(json.dumps(profiles))
        return twin

    def run(self, executable: str, *args: str) -> CommandRun:
        """``executable`` (of the venv) with ``args`` on this project; its output where it fails."""
        where = ["--project-dir", str(self.root), "--profiles-dir", str(self.root), "--target", self.target]
        started_at = datetime.now(timezone.utc)
        wall = time.perf_counter()
        done = subprocess.run(
            [str(self.bin / executable), *args, *where],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - wall
        if done.returncode:
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-40:])
            raise RuntimeError(f"`{executable} {' '.join(args)}` failed ({done.returncode}):\n{tail}")
        return CommandRun(started_at, wall, done.stdout)

    def dbt(self, *args: str) -> Tuple[CommandRun, List[ModelRun]]:
        """Run dbt; the command, and each node's result in execution order."""
        command = self.run("dbt", *args)
        results = json.loads((self.root / "target" / "run_results.json").read_text())["results"]
        models = [ModelRun.from_result(r) for r in results]
        return command, sorted(models, key=lambda m: m.execute[0] if m.execute else "")

    def refresh_history(
        self, since: Optional[datetime] = None, columns: Optional[Sequence[str]] = None
    ) -> List[Dict[str, Any]]:
        """Rows of the refresh history (``columns`` of them) started at or after ``since``,
        oldest first."""
        from deltalake import DeltaTable

        wanted = list(columns) if columns is not None else None
        if wanted is not None and "refresh_start_time" not in wanted:
            wanted.append("refresh_start_time")
        table = DeltaTable(str(self.warehouse / META_SCHEMA / REFRESH_HISTORY))
        rows = table.to_pyarrow_table(columns=wanted).to_pylist()
        rows = [r for r in rows if since is None or r["refresh_start_time"] >= since]
        return sorted(rows, key=lambda r: r["refresh_start_time"])


@contextmanager
def in_process_service(project: DbtProject) -> Iterator[Tuple["LoadedProject", "DynamicTableService"]]:
    """The project's dynamic tables as `dyntable` loads them, and a DynamicTableService on the
    embedded engine over the project's warehouse, in this process; the engine stopped after."""
    from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService
    from dbt.adapters.dyntable.engines.embedded import EmbeddedEngine
    from dbt.adapters.dyntable.runner.project import ProjectOptions, load_project

    loaded = load_project(ProjectOptions(project.root, project.root, project.target))
    if loaded.problems:
        raise RuntimeError(f"the project does not load: {loaded.problems}")
    engine = EmbeddedEngine(project.warehouse).start()
    try:
        yield loaded, DynamicTableService(engine, project.warehouse, META_SCHEMA)
    finally:
        engine.stop()


class RunnerTicks:
    """The runner's Scheduler over ``nodes``, ticked by this process: each tick refreshes every one
    of them in one metadata batch, as a tick of `dyntable run` does."""

    def __init__(self, service: "DynamicTableService", nodes: Iterable["GraphNode"]) -> None:
        from dbt.adapters.dyntable.runner.graph import build_graph
        from dbt.adapters.dyntable.runner.scheduler import Scheduler

        self.graph = build_graph(list(nodes))
        self.scheduler = Scheduler(self.graph, service)

    def tick(self) -> List["Outcome"]:
        plan = self.scheduler.dispatch(int(time.time() * 1000), roots=self.graph.order)
        return self.scheduler.execute(plan)
