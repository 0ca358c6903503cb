"""The refresh stages import in their order (docs/ARCHITECTURE.md, "The path of one refresh"):
a module of ``dynamic_table/refresh/`` imports only modules of its own stage or of the stages
below it, so a stage never reaches forward into one that runs after it."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

import dbt.adapters.dyntable.dynamic_table.refresh as refresh_package

REFRESH = Path(refresh_package.__file__).parent
PACKAGE = "dbt.adapters.dyntable.dynamic_table.refresh"

#: Each module's place, lowest first. The pieces every stage uses (the plan the decide stage asks
#: for when the action depends on it, the recorder, the DT as written, the pure write-strategy
#: choice, the change fuse) sit below the facts the stages share; then decide, derive, apply and
#: the pipeline that runs them in turn.
STAGES: Dict[str, List[str]] = {
    "pieces": [
        "planned_query",
        "carried",
        "record",
        "target",
        "strategy",
        "guard",
        "damaged",
        "immutable_rows",
    ],
    "facts": ["facts"],
    "decide": ["decide", "estimate", "net_change", "partitions", "lease_free"],
    "derive": ["delta_query"],
    "apply": [
        "held_rows",
        "apply",
        "write",
        "engine_writer",
        "deltalake_writer",
        "commit",
        "incremental",
        "rebuild",
        "compact",
        "failures",
    ],
    "pipeline": ["pipeline", "__init__"],
}
RANK = {module: rank for rank, modules in enumerate(STAGES.values()) for module in modules}


def refresh_imports(path: Path) -> Set[str]:
    """The ``refresh`` modules ``path`` imports."""
    found: Set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PACKAGE):
            if node.module == PACKAGE:
                found |= {alias.name for alias in node.names}
            else:
                found.add(node.module[len(PACKAGE) + 1 :].split(".")[0])
    return found


def test_every_refresh_module_has_a_stage() -> None:
    modules = {path.stem for path in REFRESH.glob("*.py")}
    assert modules == set(RANK), "place a new module of dynamic_table/refresh/ in STAGES"


def test_no_stage_imports_a_later_one() -> None:
    forward = [
        f"{path.stem} ({stage_of(path.stem)}) imports {imported} ({stage_of(imported)})"
        for path in sorted(REFRESH.glob("*.py"))
        for imported in sorted(refresh_imports(path))
        if RANK[imported] > RANK[path.stem]
    ]
    assert forward == []


def stage_of(module: str) -> str:
    return list(STAGES)[RANK[module]]
