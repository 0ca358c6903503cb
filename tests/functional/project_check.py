"""Check every dynamic table of a dbt project against its query at its data timestamp.

    python -m tests.functional.project_check <project_dir> [<target>]

Runs on the engine the project's profile (profiles.yml in the project) names for ``target``, in
this process of its own, and prints one JSON line: a list of {name, ok, rows, detail}. Tests run
it in a subprocess: the engine under test may be a JVM whose local metastore serves one process at
a time, or a cluster the test process is not connected to.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(project_dir: str, target: str | None = None) -> None:
    from dbt.adapters.dyntable.connections import EngineRegistry
    from dbt.adapters.dyntable.dynamic_table.verify import check_dvs
    from dbt.adapters.dyntable.runner.project import ProjectOptions, load_project

    root = Path(project_dir).resolve()
    project = load_project(ProjectOptions(root, root, target))
    store = project.metadata()
    try:
        engine = project.engine()
        checks = [check_dvs(engine, store, name) for name in sorted(store.frontiers())]
    finally:
        EngineRegistry.stop_all()
    print(json.dumps([{"name": c.name, "ok": c.ok, "rows": c.rows, "detail": c.detail} for c in checks]))


if __name__ == "__main__":
    main(*sys.argv[1:])
