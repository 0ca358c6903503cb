"""Loading a dbt project for the runner: parse and compile once, through dbt's Python API.

The runner needs what dbt knows (compiled SQL, configs, depends_on, the profile) but must not
invoke dbt per refresh: it parses and compiles the dynamic-table models once at start, then
refreshes through one warm engine (EngineRegistry) and one DynamicTableService.

Every way this can go wrong ends in one :class:`ProjectError` whose message says what to fix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple

from dbt.artifacts.schemas.run import RunExecutionResult
from dbt.cli.main import dbtRunner
from dbt.config.runtime import load_profile
from dbt.contracts.graph.manifest import Manifest
from dbt.contracts.graph.nodes import ModelNode

from dbt.adapters.dyntable.connections import (
    PROJECT_STATE,
    SPARK_METHODS,
    DyntableCredentials,
    EngineRegistry,
    Environment,
    warehouse_of,
)
from dbt.adapters.dyntable.dynamic_table.config import DynamicTableConfigError
from dbt.adapters.dyntable.dynamic_table.declared_keys import node_relation_name
from dbt.adapters.dyntable.dynamic_table.metadata import MetadataStore
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable, refresh_boundaries
from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService
from dbt.adapters.dyntable.engines.base import Engine, EngineError
from dbt.adapters.dyntable.runner.graph import GraphNode
from dbt.adapters.dyntable.vocabulary import DYNAMIC_TABLE, first_line

DBT_SELECTOR = f"config.materialized:{DYNAMIC_TABLE}"
#: Where the runner's dbt invocations write their artifacts, under the project. Never dbt's own
#: target path: a `dyntable status` must not replace the run_results.json that `dbt retry` and
#: `--state` read. Kept between commands, for dbt's partial parsing (partial_parse.msgpack); no
#: JSON artifacts (`--no-write-json`): the runner keeps the manifest in memory, and nothing reads
#: them, while writing manifest.json (twice per command) grows with the project.
TARGET_PATH = PROJECT_STATE / "target"


class ProjectError(RuntimeError):
    """The project, its profile or its dynamic tables cannot be used; nothing was refreshed."""


@dataclass(frozen=True)
class ProjectOptions:
    project_dir: Path
    profiles_dir: Optional[Path] = None
    target: Optional[str] = None
    select: Tuple[str, ...] = ()

    def dbt_args(self, command: str, *extra: str) -> List[str]:
        args = [
            command,
            "--project-dir",
            str(self.project_dir),
            "--target-path",
            str(self.project_dir / TARGET_PATH),
            "--no-write-json",
            "--log-level",
            "none",
        ]
        if self.profiles_dir is not None:
            args += ["--profiles-dir", str(self.profiles_dir)]
        if self.target:
            args += ["--target", self.target]
        return args + list(extra)


@dataclass
class LoadedProject:
    options: ProjectOptions
    credentials: DyntableCredentials
    nodes: List[GraphNode]
    selected: Optional[Set[str]] = None
    """Relation names picked by --select (None: every dynamic table)."""
    problems: Dict[str, str] = field(default_factory=dict)
    """Models that cannot be loaded (bad config, no compile, or reading such a model), with why:
    the others are kept and refreshed without them."""
    _environment: Optional[Environment] = field(default=None, repr=False)

    @property
    def warehouse(self) -> str:
        """The warehouse's location: an absolute local path, or an object store's URL."""
        return warehouse_of(self.credentials, self.options.project_dir)

    @property
    def metadata_schema(self) -> str:
        return self.credentials.metadata_schema

    def metadata(self) -> MetadataStore:
        """The metadata tables, read with `deltalake` alone: no engine needed."""
        schema = self.metadata_schema
        store = MetadataStore(
            f"{self.warehouse}/{schema.lower()}", schema, self.credentials.history_retention_days
        )
        store.ensure()
        return store

    def environment(self) -> Environment:
        """The profile's engine and services, started once for this process (shared with dbt's
        adapter)."""
        if self._environment is None:
            creds = self.credentials
            if creds.method in SPARK_METHODS:
                raise ProjectError(
                    f"The profile uses `method: {creds.method}`, which only runs SQL; dynamic "
                    "tables need a Spark session. Use `method: embedded`, `session` or `connect`."
                )
            try:
                self._environment = EngineRegistry.get(creds, self.options.project_dir)
            except EngineError as exc:
                raise ProjectError(f"Cannot connect with the profile's target: {exc}") from exc
            except Exception as exc:  # noqa: BLE001 - any start failure is a connection failure
                raise ProjectError(
                    f"Cannot connect with the profile's target (method: {creds.method}): {first_line(exc)}"
                ) from exc
        return self._environment

    def engine(self) -> Engine:
        return self.environment().engine

    def service(self) -> DynamicTableService:
        return self.environment().service(self.credentials)


def load_project(options: ProjectOptions) -> LoadedProject:
    """Parse the project, read its profile, compile its dynamic tables (no engine is started)."""
    project_dir = options.project_dir.expanduser().resolve()
    options = ProjectOptions(project_dir, options.profiles_dir, options.target, options.select)
    if not (project_dir / "dbt_project.yml").is_file():
        raise ProjectError(f"No dbt project in {project_dir} (no dbt_project.yml). Pass --project-dir.")
    parsed = dbtRunner().invoke(options.dbt_args("parse"))
    manifest = parsed.result
    if not parsed.success or not isinstance(manifest, Manifest):
        raise ProjectError(f"The dbt project in {project_dir} does not parse: {_why(parsed)}")
    credentials = _credentials(options)

    problems: Dict[str, str] = {}
    dt_nodes = {
        uid: node
        for uid, node in manifest.nodes.items()
        if isinstance(node, ModelNode) and node.config.materialized == DYNAMIC_TABLE
    }
    compiled: Dict[str, str] = {}
    if dt_nodes:
        # --no-populate-cache: compiling plain SELECTs needs no engine, so status and friends
        # start none; the runner starts one when it refreshes.
        result = dbtRunner(manifest=manifest).invoke(
            options.dbt_args(
                "compile",
                "--no-populate-cache",
                "--select",
                DBT_SELECTOR,
                "--indirect-selection",
                "empty",
            )
        )
        if not isinstance(result.result, RunExecutionResult):
            raise ProjectError(f"The dynamic-table models do not compile: {_why(result)}")
        compiled = {
            r.node.unique_id: r.node.compiled_code
            for r in result.result.results
            if isinstance(r.node, ModelNode) and r.node.compiled_code is not None
        }
        problems.update(
            {
                r.node.name: f"does not compile: {' '.join(str(r.message).split())}"
                for r in result.result.results
                if str(r.status).lower() == "error"
            }
        )

    manifest.build_flat_graph()  # type: ignore[no-untyped-call]
    nodes = []
    for uid, node in dt_nodes.items():
        if node.name in problems:
            continue
        try:
            nodes.append(_graph_node(manifest, uid, node, compiled.get(uid)))
        except ProjectError as exc:
            problems[node.name] = str(exc)
    selected = _select(manifest, options, dt_nodes) if options.select else None
    return LoadedProject(options, credentials, _without_broken_upstream(nodes, problems), selected, problems)


def _without_broken_upstream(nodes: List[GraphNode], problems: Dict[str, str]) -> List[GraphNode]:
    """``nodes`` less those reading (transitively) a dynamic table that did not load."""
    kept = list(nodes)
    while True:
        loaded = {n.name for n in kept}
        broken = [(n, sorted(n.upstream - loaded)) for n in kept if not n.upstream <= loaded]
        if not broken:
            return kept
        for node, missing in broken:
            problems[node.model] = f"reads {', '.join(missing)}, which cannot be loaded"
        kept = [n for n in kept if n.upstream <= loaded]


def _why(result: Any) -> str:
    if result.exception is not None:
        text = str(result.exception).strip()
        return " ".join(text.split()) if text else type(result.exception).__name__
    failures = [
        f"{r.node.name}: {' '.join(str(r.message).split())}"
        for r in getattr(result.result, "results", []) or []
        if str(getattr(r, "status", "")).lower() in ("error", "fail")
    ]
    return "; ".join(failures) or "dbt reported a failure (run dbt with the same arguments to see it)"


def _credentials(options: ProjectOptions) -> DyntableCredentials:
    try:
        profile = load_profile(str(options.project_dir), {}, None, options.target, None)
    except Exception as exc:  # noqa: BLE001 - dbt raises several types for a bad profile
        raise ProjectError(f"The profile cannot be loaded: {' '.join(str(exc).split())}") from exc
    creds = profile.credentials
    if not isinstance(creds, DyntableCredentials):
        raise ProjectError(
            f"The profile's target '{profile.target_name}' is of type '{creds.type}'; the dyntable "
            "runner needs `type: dyntable`."
        )
    return creds


def _graph_node(manifest: Any, uid: str, node: Any, sql: Optional[str]) -> GraphNode:
    if sql is None:
        raise ProjectError(f"Model '{node.name}' was not compiled; run `dbt compile` to see why.")
    try:
        dt = DynamicTable.from_node(node, manifest.flat_graph, sql)
    except DynamicTableConfigError as exc:
        raise ProjectError(str(exc)) from None
    boundaries = refresh_boundaries(sql)
    upstream: Set[str] = set()
    others: Set[str] = set()
    edges: Set[Tuple[str, str]] = set()
    # Walk depends_on through non-DT models (views, ephemerals, tables) down to the DTs and
    # sources beneath: reading a view of a DT still reads the DT (the refresh expands views).
    # Each step is (what is read, the relation reading it), for the lineage the page draws.
    pending = [(parent_id, dt.name) for parent_id in node.depends_on.nodes]
    seen: Set[str] = set()
    while pending:
        parent_id, reader = pending.pop()
        parent = manifest.nodes.get(parent_id) or manifest.sources.get(parent_id)
        if parent is None:
            continue
        relation = node_relation_name(parent)
        if relation in boundaries:
            continue
        is_dt = parent_id in manifest.nodes and parent.config.materialized == DYNAMIC_TABLE
        if is_dt or parent.resource_type in ("model", "snapshot", "seed", "source"):
            edges.add((relation, reader))
        if parent_id in seen:
            continue
        seen.add(parent_id)
        if is_dt:
            upstream.add(relation)
            continue
        if parent.resource_type in ("model", "snapshot", "seed", "source"):
            others.add(relation)
            reader = relation
        parents = getattr(getattr(parent, "depends_on", None), "nodes", []) or []
        pending.extend((grandparent, reader) for grandparent in parents)
    return GraphNode(
        model=node.name,
        dt=dt,
        upstream=frozenset(upstream),
        boundary_inputs=frozenset(boundaries),
        other_inputs=frozenset(others),
        input_edges=frozenset(edges),
    )


def _select(manifest: Any, options: ProjectOptions, dt_nodes: Dict[str, Any]) -> Set[str]:
    """Relation names of the dynamic tables that dbt's selection syntax picks."""
    listed = dbtRunner(manifest=manifest).invoke(
        options.dbt_args(
            "ls",
            "--select",
            *options.select,
            "--resource-type",
            "model",
            "--output",
            "json",
            "--output-keys",
            "unique_id",
        )
    )
    if not listed.success:
        raise ProjectError(f"--select {' '.join(options.select)}: {_why(listed)}")
    lines = listed.result if isinstance(listed.result, list) else []
    ids = {json.loads(line)["unique_id"] for line in lines}
    chosen = {node_relation_name(dt_nodes[uid]) for uid in ids if uid in dt_nodes}
    if not chosen:
        raise ProjectError(
            f"--select {' '.join(options.select)} picks no dynamic table. Dynamic tables: "
            + ", ".join(sorted(n.name for n in dt_nodes.values()))
        )
    return chosen
