"""Incremental where users are (issue 53): a user-shaped project through dbt and the runner.

A project shaped as users build them, refreshed through `dbt run`, `dbt build` and the runner, and
the focused cases of the issue's goals.

The project (benchmarks/iot_project.py) is written to a temp folder: two seeds, a Delta source of
readings written with the `deltalake` package, a `table` model rebuilt by every `dbt run`, a view
and nine dynamic tables (joins to the table model, group-bys, a top-1 per device, a window, DTs
over DTs two levels deep). After its first `dbt build` come rounds of small changes (each at most
1% of the readings): nothing changed, inserts, updates and deletes, a one-row seed edit, a big
data fix that rewrites the source into one large file (changing 0.47% of its values), single-row
updates and a delete of that file, a one-row edit of the lookup seed; each round a `dbt run` or
`dbt build` (which rebuilds the table model) or a `dyntable run --once`. After every round every
dynamic table is compared with its query at its data timestamp (verify.py's full check) and the
run stops loudly if one differs. Reported: each DT's mix of refresh actions from the refresh
history, the reasons of those neither INCREMENTAL nor NO_DATA, and each DT's model time per round
(dbt's run_results.json; the refresh's own duration under the runner).

The focused cases run in a project of their own over a fact of N rows (`--sizes`), through `dbt
run`, each three times and reported by the median: a DT joined to a rebuilt, unchanged `table`
model of 10,000 rows, against a NO_DATA refresh of the same DT plus one read of the table model
(by the engine, warm, every row into its process: the median of five); a DT over one that
refreshes FULL after an insert of 0.1% of the fact, beside the same DT over an incremental twin;
single-row updates (the engine's UPDATE, through `dbt run-operation`) of a source stored in one
file of N rows, with deletion vectors and without, read by DTs of refresh_mode auto, incremental
and full; recent readings corrected (0.01% of the fact, rewriting its last file) under a daily
GROUP BY whose rescan is pruned to the change's days, read by DTs of the three modes. Where the
refresh history records what a refresh read (a column named like rows_read or
files_read), the report shows it.

Both parts run on the embedded engine and on JVM Spark (`method: session`, with `spark_jars` from
DYNTABLE_SPARK_JARS or --spark-jars; without it, JVM Spark is skipped and the report says so),
there the focused cases at the sizes up to 1M rows unless `--jvm-sizes` says.

    .venv/bin/python -m benchmarks.user_shaped            # 1M readings; focused 10M (JVM Spark: 1M)
    .venv/bin/python -m benchmarks.user_shaped --sizes 1000000 --engines embedded   # a quick run

Results: benchmarks/results/user_shaped.md, user_shaped.goals.json, user_shaped.json (the
measurements, for --keep-unmeasured and --report-only) and user_shaped.png; the report and the plot
set them beside user_shaped.before.json, the same code's run on main before issue 53's product work.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from string import Template
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import pyarrow as pa
from rich.console import Console

from benchmarks.common import RESULTS, add_spark_jars_option, docstring_paragraphs, say, utc_minute
from benchmarks.iot_project import (
    DEVICE_MODELS,
    DYNAMIC_TABLES,
    RAW,
    REGIONS,
    SCHEMA,
    DbtProject,
    Readings,
    seeds,
    write_dbt_project,
    write_project,
)
from benchmarks.user_shaped_before import BEFORE, compared
from benchmarks.user_shaped_plot import plot
from benchmarks.user_shaped_report import (
    ENGINE_NAMES,
    ENGINES,
    FIRST_BUILD,
    NAME,
    PRUNED,
    PRUNED_ROUND,
    READ_COLUMN,
    SINGLE_ROW_ROUND,
    Refresh,
    Results,
    Round,
    report,
)

#: Each focused case runs this many times; its figures are the medians.
REPEATS = 3


# -- the focused cases' project ----------------------------------------------------------------------

#: Its dimension: a `table` model of this many devices, over a raw table.
FOCUSED_DEVICES = 10_000
#: Its sources stored in one large file, with deletion vectors (dv) and without (cow).
BIG_FILE_SOURCES = {"dv": "big_dv", "cow": "big_cow"}
JOINED = "from $readings as r join {{ ref('dim_devices') }} as d on d.device_id = r.device_id"
#: DT → (tag, refresh_mode, query): `dbt run --select tag:<tag>` refreshes a case's DTs alone.
FOCUSED: Dict[str, Tuple[str, str, str]] = {
    "site_totals": (
        "rebuilt_dim",
        "auto",
        "select d.site, to_date(r.reading_at) as reading_date, count(*) as readings, "
        f"avg(r.temperature) as avg_temperature {JOINED} group by d.site, to_date(r.reading_at)",
    ),
    "readings_sited": (
        "rebuilt_dim",
        "auto",
        f"select r.reading_id, r.reading_at, r.temperature, d.site {JOINED}",
    ),
    **{
        f"humid_{mode}": (
            "after_full",
            mode,
            "select reading_id, device_id, humidity from $readings where humidity > 60",
        )
        for mode in ("full", "incremental")
    },
    **{
        f"humid_by_device_after_{mode}": (
            "after_full",
            "auto",
            f"select device_id, count(*) as readings, max(humidity) as most_humid from {{{{ ref('humid_{mode}') }}}} "
            "group by device_id",
        )
        for mode in ("full", "incremental")
    },
    **{
        f"{kind}_{mode}": (
            "single_row",
            mode,
            "select reading_id, device_id, reading_at, round(temperature * 1.8 + 32, 2) as temperature_f, humidity "
            f"from ${kind} where humidity < 100",
        )
        for kind in BIG_FILE_SOURCES
        for mode in ("auto", "incremental", "full")
    },
    # max() cannot fold an update: the touched days are recomputed from the fact, within their range
    **{
        f"{PRUNED}_{mode}": (
            "pruned",
            mode,
            "select to_date(reading_at) as reading_date, count(*) as readings, max(temperature) as peak "
            "from $readings group by to_date(reading_at)",
        )
        for mode in ("auto", "incremental", "full")
    },
}
UPDATE_ONE = """{% macro update_one(reading_id) %}{% for table in $tables %}
  {% do run_query("update raw." ~ table ~ " set temperature = temperature + 1 where reading_id = " ~ reading_id) %}
{% endfor %}{% endmacro %}
"""


def focused_files() -> Dict[str, str]:
    """The focused project's models, its sources and the macro of its single-row updates."""
    tables = ("readings", "devices", *BIG_FILE_SOURCES.values())
    names = {"readings": "readings", **BIG_FILE_SOURCES}
    sources = {k: f"{{{{ source('raw', '{t}') }}}}" for k, t in names.items()}
    files = {
        "models/dim_devices.sql": "{{ config(materialized='table') }}\n"
        "select device_id, site, region from {{ source('raw', 'devices') }}\n",
        "models/sources.yml": "version: 2\nsources:\n  - name: raw\n    tables:\n"
        + "".join(f"      - name: {t}\n" for t in tables),
        "macros/update_one.sql": Template(UPDATE_ONE).substitute(
            tables=json.dumps(list(BIG_FILE_SOURCES.values()))
        ),
    }
    for name, (tag, mode, sql) in FOCUSED.items():
        config = (
            f"materialized='dynamic_table', target_lag='5 minutes', refresh_mode='{mode}', tags=['{tag}']"
        )
        files[f"models/{name}.sql"] = f"{{{{ config({config}) }}}}\n{Template(sql).substitute(sources)}\n"
    return files


def write_focused_project(
    root: Path, rows: int, target: str, spark_jars: Optional[Path]
) -> Tuple[DbtProject, Readings]:
    """``rows`` readings as an ingest job writes them, the devices, and the two big-file sources of
    ``rows`` readings each (their single-row updates are the engine's, through `dbt run-operation
    update_one`: the deltalake package writes no deletion vectors)."""
    from deltalake import write_deltalake

    project = write_dbt_project(root, target, focused_files(), spark_jars)
    fact = Readings(project.location(RAW, "readings"), rows, FOCUSED_DEVICES)
    fact.load()
    ids = list(range(1, FOCUSED_DEVICES + 1))
    devices = {
        "device_id": ids,
        "site": [f"site-{i % 400:03d}" for i in ids],
        "region": [REGIONS[i % 5] for i in ids],
    }
    write_deltalake(str(project.location(RAW, "devices")), pa.table(devices))
    for kind, table in BIG_FILE_SOURCES.items():
        vectors: Optional[Dict[str, Optional[str]]] = (
            {"delta.enableDeletionVectors": "true"} if kind == "dv" else None
        )
        Readings(project.location(RAW, table), rows, FOCUSED_DEVICES).load(vectors, files=1)
    return project, fact


# -- measuring ---------------------------------------------------------------------------------------


class Bench:
    def __init__(self, results: Results, console: Console) -> None:
        self.results, self.console = results, console

    def say(self, engine: str, text: str) -> None:
        say(self.console, f"{ENGINE_NAMES[engine]}: {text}")

    def record(
        self,
        project: DbtProject,
        part: str,
        rows: int,
        label: str,
        started: datetime,
        times: Dict[str, float],
    ) -> List[Refresh]:
        """The refresh history since ``started`` as Refresh rows; ``times``: model → dbt's model
        time (a refresh absent from it, the runner's, is timed by its history row)."""
        recorded = []
        for row in project.history(started):
            model = row["name"].split(".")[-1]
            own = (row["refresh_end_time"] - row["refresh_start_time"]).total_seconds()
            reads = {k: v for k, v in row.items() if READ_COLUMN.search(k) and v is not None}
            recorded.append(
                Refresh(
                    project.target,
                    part,
                    rows,
                    label,
                    model,
                    row["refresh_action"] or "–",
                    row["state"],
                    row["refresh_trigger"],
                    row["reason"] or "",
                    times.get(model, own),
                    row["rows_inserted"] or 0,
                    row["rows_deleted"] or 0,
                    reads,
                    row.get("state_message") or "",
                )
            )
        self.results.refreshes.extend(recorded)
        return recorded

    def dbt(self, project: DbtProject, part: str, rows: int, label: str, *args: str) -> float:
        """`dbt <args>`, its refreshes and tests recorded as ``label``; its wall seconds."""
        invocation, results = project.dbt(*args)
        bad = [(r["unique_id"], r["message"]) for r in results if r["status"] not in ("success", "pass")]
        if bad:
            raise RuntimeError(f"`{invocation.command}`: {bad}")
        times = {r["unique_id"].split(".")[2]: float(r["execution_time"]) for r in results}
        for test in (r["unique_id"].split(".")[2] for r in results if r["unique_id"].startswith("test.")):
            self.results.refreshes.append(
                Refresh(project.target, part, rows, label, test, "TEST", "pass", "", "", times[test])
            )
        self.record(project, part, rows, label, invocation.started_at, times)
        return invocation.wall

    def project_round(self, project: DbtProject, source: Readings, step: "Step") -> None:
        """One round: the change, the command, then every DT against its query (stops if one differs)."""
        rows, engine = source.rows, project.target
        change = step.change(source, project)
        load = os.getloadavg()[0]
        if step.command[0] == "dbt":
            wall = self.dbt(project, "project", rows, step.name, *step.command[1:])
        else:
            invocation = project.run(*step.command)
            wall = invocation.wall
            self.record(project, "project", rows, step.name, invocation.started_at, {})
        checked = time.perf_counter()
        checks = project.check()
        checked = time.perf_counter() - checked
        exact = [c for c in checks if c["ok"]]
        command = " ".join(step.command)
        self.results.rounds.append(
            Round(engine, rows, step.name, change, command, wall, checked, len(exact), len(checks), load)
        )
        self.say(
            engine, f"{step.name}: {change}; `{command}` {wall:.1f} s, {len(exact)}/{len(checks)} DTs equal"
        )
        if len(exact) < len(DYNAMIC_TABLES):
            wrong = [f"{c['name']}: {c['detail']}" for c in checks if not c["ok"]]
            raise RuntimeError(f"after round {step.name!r} not every DT equals its query: {wrong or checks}")

    def project(self, root: Path, engine: str, rows: int, spark_jars: Optional[Path]) -> None:
        project, source = write_project(root, rows, engine, spark_jars)
        self.say(engine, f"project written, {rows:,} readings loaded")
        for step in ROUNDS:
            self.project_round(project, source, step)

    def focused(self, root: Path, engine: str, rows: int, spark_jars: Optional[Path]) -> None:
        """The focused cases, each ``REPEATS`` times (see the module's docstring)."""
        project, fact = write_focused_project(root, rows, engine, spark_jars)
        self.say(engine, f"focused project written, {rows:,} rows a source")
        run = functools.partial(self.dbt, project, "focused", rows)
        run("create", "run")
        for _ in range(REPEATS):
            run("rebuilt", "run", "--select", "dim_devices", "tag:rebuilt_dim")
            run("no change", "run", "--select", "tag:rebuilt_dim")
        read = project.read_seconds(f"{SCHEMA}.dim_devices")
        self.results.refreshes.append(
            Refresh(engine, "focused", rows, "read", "dim_devices", "READ", "", "", "", read)
        )
        self.say(engine, "a DT over a rebuilt table model: done")
        for _ in range(REPEATS):
            fact.insert(max(1, rows // 1000))
            run("insert", "run", "--select", "tag:after_full")
        self.say(engine, "a DT downstream of a FULL: done")
        for repeat in range(REPEATS):
            changed = {"reading_id": rows // (repeat + 2) + 1}
            project.run("dbt", "run-operation", "update_one", "--args", json.dumps(changed))
            vectors_as_claimed(project)
            run(SINGLE_ROW_ROUND, "run", "--select", "tag:single_row")
        self.say(engine, "single-row updates of a one-file source: done")
        for _ in range(REPEATS):
            fact.correct(max(1, rows // 10_000))
            run(PRUNED_ROUND, "run", "--select", "tag:pruned")
        self.say(engine, "corrections under a daily GROUP BY: done")
        wrong = [f"{c['name']}: {c['detail']}" for c in project.check() if not c["ok"]]
        if wrong:
            raise RuntimeError(f"the focused cases' DTs differ from their queries: {wrong}")


def vectors_as_claimed(project: DbtProject) -> None:
    """The engine's UPDATE left a deletion vector in big_dv and none in big_cow: the case is what
    the report calls it."""
    from dbt.adapters.dyntable.delta_log import DeltaLog

    for kind, table in BIG_FILE_SOURCES.items():
        log = DeltaLog(project.location(RAW, table))
        vectors = bool(log.snapshot(log.latest_version()).deleted_rows)
        if vectors != (kind == "dv"):
            raise RuntimeError(f"raw.{table}: after a single-row UPDATE, deletion vectors: {vectors}")


@dataclass(frozen=True)
class Step:
    """A round of the project: a change, then a command."""

    name: str
    change: Callable[[Readings, DbtProject], str]
    command: Tuple[str, ...]


def edit_seeds(project: DbtProject, moved: Sequence[int] = (), warmer: Sequence[str] = ()) -> str:
    """Both seed files written whole with these edits; says what is new (a lookup edit keeps the
    devices' earlier one)."""
    for name, text in seeds(moved, warmer).items():
        (project.root / "seeds" / name).write_text(text)
    edits = [f"lookup: {c} alarms 2 degrees higher" for c in warmer]
    return ", ".join(edits or [f"devices: device {d} moved to another site" for d in moved])


RUN, BUILD, RUNNER = ("dbt", "run"), ("dbt", "build"), ("dyntable", "run", "--once")
WARMER = DEVICE_MODELS[2][0]
ROUNDS = (
    Step(FIRST_BUILD, lambda r, p: f"{r.rows:,} readings loaded", BUILD),
    Step("nothing changed", lambda r, p: "no change (the run rebuilds the table model)", RUN),
    Step("inserts", lambda r, p: r.insert(r.rows // 200), RUN),
    Step("updates, deletes", lambda r, p: f"{r.correct(r.rows // 500)}; {r.delete(r.rows // 1000)}", RUN),
    Step("seed edit", lambda r, p: edit_seeds(p, moved=(17,)), BUILD),
    Step("inserts, runner", lambda r, p: r.insert(r.rows // 500), RUNNER),
    Step("big rewrite", lambda r, p: r.cap_humidity(), RUN),
    Step("single-row updates", lambda r, p: "; ".join(r.update_one(r.rows // k + 1) for k in (2, 3, 7)), RUN),
    Step(
        "lookup edit, inserts",
        lambda r, p: f"{edit_seeds(p, (17,), (WARMER,))}; {r.insert(r.rows // 1000)}",
        BUILD,
    ),
    Step("single-row delete, runner", lambda r, p: r.delete_one(r.rows // 5 + 1), RUNNER),
)


def intro() -> str:
    return "\n\n".join(docstring_paragraphs(__doc__, 2, 3, 4))


def arguments(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="readings in the project's source")
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[10_000_000], help="the focused cases' fact rows"
    )
    parser.add_argument(
        "--jvm-sizes",
        type=int,
        nargs="+",
        help="the focused cases' sizes on JVM Spark (default: --sizes up to 1M)",
    )
    parser.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES))
    parser.add_argument("--parts", nargs="+", choices=("project", "focused"), default=["project", "focused"])
    add_spark_jars_option(parser)
    parser.add_argument(
        "--keep-unmeasured",
        action="store_true",
        help=f"keep results/{NAME}.json's measurements of the engines, parts and sizes not measured now",
    )
    parser.add_argument(
        "--report-only", action="store_true", help=f"rewrite the report from results/{NAME}.json"
    )
    return parser.parse_args(argv)


def publish(results: Results, command: str) -> None:
    """results/user_shaped.md, its goals beside the run before issue 53's product work, and its plot."""
    before = Results.load(BEFORE) if BEFORE.exists() else None
    report(results, command, intro(), compared(before, results))
    plot(results, before, RESULTS / f"{NAME}.png")


def jvm_sizes(sizes: Sequence[int]) -> List[int]:
    """JVM Spark's focused sizes by default: those up to 1M rows, else the smallest (a rebuild of
    10M rows there takes minutes, each of the cases' many)."""
    return [s for s in sizes if s <= 1_000_000] or [min(sizes)]


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = arguments(argv)
    raw = RESULTS / f"{NAME}.json"
    if args.report_only:
        saved = Results.load(raw)
        publish(saved, saved.command + " (report rewritten with --report-only)")
        return 0
    given = list(argv if argv is not None else sys.argv[1:])
    # The report names the jars' folder as the environment variable does, not this machine's path.
    shown = [
        "$DYNTABLE_SPARK_JARS" if before == "--spark-jars" else a for before, a in zip(["", *given], given)
    ]
    command = " ".join(["python -m benchmarks.user_shaped", *shown])
    results, console = Results(), Console()
    bench, scratch = Bench(results, console), Path(tempfile.mkdtemp(prefix="dyntable-bench-shaped-"))
    try:
        for engine in args.engines:
            if engine == "jvm" and not args.spark_jars:
                results.skipped[engine] = (
                    "DYNTABLE_SPARK_JARS is not set (JVM Spark needs a folder of Delta's jars here)"
                )
                console.print(f"JVM Spark skipped: {results.skipped[engine]}")
                continue
            parts = [("project", args.rows)] * ("project" in args.parts)
            focused = args.sizes if engine == "embedded" else args.jvm_sizes or jvm_sizes(args.sizes)
            parts += [("focused", rows) for rows in focused if "focused" in args.parts]
            for part, rows in parts:
                measure = bench.project if part == "project" else bench.focused
                key = f"{engine} {part} {rows}"
                started = time.perf_counter()
                try:
                    measure(scratch / key.replace(" ", "-"), engine, rows, args.spark_jars)
                except Exception as exc:  # noqa: BLE001 - reported with the results, and exit 1
                    results.failures.append(f"{key}: {exc}")
                    console.print(f"[bold red]{ENGINE_NAMES[engine]}, {part}, {rows:,} rows FAILED:[/] {exc}")
                finally:
                    results.measured_at[key] = utc_minute()
                    results.durations[key] = time.perf_counter() - started
                    shutil.rmtree(scratch / key.replace(" ", "-"), ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if args.keep_unmeasured and raw.exists():
        results = results.keeping(Results.load(raw))
    results.command = command
    results.save(raw)
    publish(results, command)
    console.print(f"{NAME}: see {raw.with_suffix('.md')}")
    return 1 if results.failures else 0


if __name__ == "__main__":
    sys.exit(main())
