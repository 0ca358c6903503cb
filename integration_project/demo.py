"""The end-to-end demo: build the shop, keep it fresh while data streams in, prove it is right.

1. a fresh warehouse, and raw Delta tables with history written by generator.py;
2. `dbt build`: seeds, views, tables, the incremental model, the snapshot, every dynamic table, tests;
3. `dyntable run` in the background while the generator inserts, updates and deletes;
4. `dyntable status`, then every dynamic table checked against its query at its data timestamp;
5. `dyntable report`: the lag chart.

Exits non-zero if any step or check fails. ``--target`` picks the profile's target (profiles.yml):
``embedded`` (the default), ``session`` (JVM Spark with Delta: set DYNTABLE_SPARK_JARS to a folder of
Delta's jars where Maven cannot be reached) or ``cluster`` (a Spark standalone cluster at
DYNTABLE_SPARK_MASTER). ``--warehouse s3://bucket/path`` puts the warehouse on object storage (the
``s3`` target, embedded engine): with no store named in the environment (AWS_ENDPOINT_URL), an S3
API server is started on 127.0.0.1 for the demo and stopped after it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
WAREHOUSE = HERE / ".dyntable" / "warehouse"
console = Console()


def step(title: str) -> None:
    console.rule(f"[bold]{title}")


def run(*command: str, **kwargs) -> None:
    console.print(f"[dim]$ {' '.join(command)}")
    completed = subprocess.run(command, cwd=HERE, **kwargs)
    if completed.returncode != 0:
        console.print(f"[red]failed ({completed.returncode}): {' '.join(command)}")
        sys.exit(completed.returncode or 1)


def dyntable(target: str, *args: str) -> list:
    return [
        str(BIN / "dyntable"),
        *args,
        "--project-dir",
        str(HERE),
        "--profiles-dir",
        str(HERE),
        "--target",
        target,
    ]


def check_every_dynamic_table(target: str) -> bool:
    """The semantics contract, on a fresh engine of the profile's target over the warehouse the
    pipeline wrote."""
    from dbt.adapters.dyntable.connections import EngineRegistry
    from dbt.adapters.dyntable.dynamic_table.verify import check_dvs
    from dbt.adapters.dyntable.runner.project import ProjectOptions, load_project

    project = load_project(ProjectOptions(HERE, HERE, target))
    store = project.metadata()
    try:
        engine = project.engine()
        table = Table("dynamic table", "data timestamp", "rows", "equals its query", "detail")
        ok = True
        for name in sorted(store.frontiers()):
            check = check_dvs(engine, store, name)
            ok &= check.ok
            stamp = f"{check.frontier.data_timestamp:%H:%M:%S}" if check.frontier else "-"
            table.add_row(name, stamp, str(check.rows), "[green]yes" if check.ok else "[red]NO", check.detail)
        console.print(table)
        return ok
    finally:
        EngineRegistry.stop_all()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=120, help="how long data streams in")
    parser.add_argument(
        "--time-scale",
        type=float,
        default=0.0625,
        help="shrinks the runner's canonical period (48 s) for the demo",
    )
    parser.add_argument(
        "--target", default="embedded", help="the profiles.yml target to run on: embedded, session or cluster"
    )
    parser.add_argument(
        "--warehouse", help="an object store's URL (s3://bucket/path) instead of the local default"
    )
    args = parser.parse_args()
    server = None
    warehouse = str(WAREHOUSE)
    if args.warehouse:
        warehouse, server = object_store(args.warehouse)
        args.target = "s3"
    try:
        demo(args, warehouse)
    finally:
        if server is not None:
            server.stop()


def object_store(url: str):
    """The warehouse at ``url``, emptied; an S3 API server on 127.0.0.1 when the environment names
    no store (AWS_ENDPOINT_URL): its endpoint and credentials go to every step's environment, as a
    user's would."""
    from dbt.adapters.dyntable import storage

    parsed = storage.parse_url(url, key="--warehouse")
    server = None
    if not os.environ.get("AWS_ENDPOINT_URL"):
        from dbt.adapters.dyntable.testing.s3_server import S3Server

        server = S3Server(bucket=parsed.bucket)
        os.environ.update(server.environment())
        console.print(f"[dim]an S3 API server for the demo at {server.endpoint}, bucket {parsed.bucket}")
    os.environ["DYNTABLE_WAREHOUSE"] = parsed.url
    storage.warehouse_storage(parsed.url).delete_tree(parsed.url)
    return parsed.url, server


def demo(args: argparse.Namespace, warehouse: str) -> None:
    step("1. a fresh warehouse with raw data")
    shutil.rmtree(HERE / ".dyntable", ignore_errors=True)
    run(sys.executable, "generator.py", "init", "--warehouse", warehouse)

    step("2. dbt build")
    run(str(BIN / "dbt"), "build", "--profiles-dir", ".", "--target", args.target)

    step(f"3. the runner keeps the dynamic tables fresh while data streams in for {args.seconds:.0f} s")
    runner = subprocess.Popen(
        dyntable(
            args.target, "run", "--for", f"{args.seconds + 20:.0f}s", "--time-scale", str(args.time_scale)
        ),
        cwd=HERE,
    )
    try:
        time.sleep(2)
        run(
            sys.executable,
            "generator.py",
            "stream",
            "--warehouse",
            warehouse,
            "--seconds",
            str(args.seconds),
        )
        if runner.wait(timeout=args.seconds + 300) != 0:
            console.print("[red]the runner failed")
            sys.exit(1)
    finally:
        if runner.poll() is None:
            runner.terminate()
            runner.wait()

    step("4. status, and every dynamic table against its query at its data timestamp")
    run(*dyntable(args.target, "status"))
    ok = check_every_dynamic_table(args.target)

    step("5. the lag report")
    run(*dyntable(args.target, "report", "--output", str(HERE / "target" / "lag_report.html")))
    console.print(f"report: {HERE / 'target' / 'lag_report.html'}")
    if not ok:
        console.print("[red bold]some dynamic tables differ from their query")
        sys.exit(1)
    console.print("[green bold]every dynamic table equals its query at its data timestamp")


if __name__ == "__main__":
    main()
