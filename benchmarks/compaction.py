"""Compaction (docs/ARCHITECTURE.md, "Compaction"): what a dynamic table's small files cost the user,
what compacting them costs, and what a source compacted by its owner costs, through `dbt run`, side
by side in one run on the embedded engine.

A dbt project (user_cost.Project, run through the venv's executables) over the fact of data.py: the
filter/project DT twice, compacted as every DT is by default (`auto_compact`) and never
(`auto_compact=false`), and over each a group-by DT reading it (downstream).

1. History: ``--appends`` runner ticks in this process (the runner's Scheduler, one metadata batch
   each, as `dyntable run` ticks), each after COMMIT_ROWS rows appended to the fact by another
   writer, so each tick appends a file to both twins. Per twin: its files afterwards, and its
   refresh times, median and mean (the compacting refreshes included). From the compacted twin's
   Delta log: the bytes its compactions rewrote (their removed files) against the bytes its
   refreshes appended and the bytes of its first build.
2. Through `dbt run`, DBT_RUNS runs per twin (`--select <twin>+`, each twin in runs of its own, so
   neither is the first model of a process more often), each after INSERTED new rows: the
   INCREMENTAL time of the twin and of its downstream DT, which reads it across its compactions.
   Then `dbt run --full-refresh --select <downstream>`, DBT_RUNS times each: a rebuild reads every
   file of its upstream DT.
3. A source compacted by its owner: DBT_RUNS rounds, each of SMALL_COMMITS appends of COMMIT_ROWS
   rows consumed by a `dbt run`, then a measured `dbt run` after INSERTED rows; in every other
   round the fact's small files are compacted before that insert (as user_cost's history phase
   compacts them). The twins' INCREMENTAL time with and without a compaction before it, and what
   the refresh read of the fact (the interval's rows) beside the rows of the end snapshots' file-set
   difference, which is what a reader that does not take compactions out of an interval reads.
4. One compaction, two ways, on copies of the uncompacted twin restored to the version where its
   first compaction falls due (its first build and the 50 files of its first 25 refreshes):
   merging its size tier, as a DT's compaction does, against deltalake's `optimize.compact`, which
   merges every file under its target (what a DT's compaction did before it merged a tier),
   COMPACTION_ROUNDS rounds each on a fresh copy.

    .venv/bin/python -m benchmarks.compaction               # 1M rows, 500 ticks: about 12 minutes

Results: benchmarks/results/compaction.md, compaction.goals.json and compaction.png.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from rich.console import Console

from benchmarks.common import RESULTS, Goal, markdown_table, pyplot, write_results
from benchmarks.data import SHAPES, Fact
from benchmarks.user_cost import FactWriter, Project, with_sources

NAME = "compaction"
TITLE = "Compaction: a DT's small files, its compactions, and a source compacted by its owner"
META_SCHEMA = "dyntable_meta"
DT_SCHEMA = "analytics"
COMPACTED, UNCOMPACTED = "dt_appended_compacted", "dt_appended_uncompacted"
TWINS = {COMPACTED: "true", UNCOMPACTED: "false"}
DOWNSTREAM = {COMPACTED: "dt_by_customer_compacted", UNCOMPACTED: "dt_by_customer_uncompacted"}
COMMIT_ROWS = 100
INSERTED = 1_000
DBT_RUNS = 3
SMALL_COMMITS = 50
COMPACTION_ROUNDS = 3
WITHIN = 1.2
#: The history phase's first and last ticks compared: what a refresh costs as the DTs' logs and
#: the fact's grow by a commit a tick.
TREND_TICKS = 50


def models() -> Dict[str, str]:
    appended = with_sources(SHAPES["filter/project"]).strip()
    found: Dict[str, str] = {}
    for twin, auto_compact in TWINS.items():
        config = (
            "materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental', "
            f"auto_compact={auto_compact}"
        )
        found[twin] = f"{{{{ config({config}) }}}}\n{appended}\n"
        found[DOWNSTREAM[twin]] = (
            "{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}\n"
            "select customer_id, channel, count(*) as orders, sum(gross) as gross\n"
            f"from {{{{ ref('{twin}') }}}} group by customer_id, channel\n"
        )
    return found


@dataclass
class Results:
    rows: int
    appends: int
    #: Per twin: the refresh times of the history phase, and its live files after it.
    tick_seconds: Dict[str, List[float]] = field(default_factory=dict)
    compactions: Dict[str, int] = field(default_factory=dict)
    files: Dict[str, int] = field(default_factory=dict)
    #: The compacted twin's bytes: of its first build, appended by its refreshes, and rewritten
    #: by its compactions (the files they removed).
    built_bytes: int = 0
    appended_bytes: int = 0
    rewritten_bytes: int = 0
    #: (run, model) → execution times through dbt.
    dbt: Dict[Tuple[str, str], List[float]] = field(default_factory=dict)
    #: Per measured run of phase 3: (with a compaction, rows the interval read, rows of the
    #: file-set difference).
    source_reads: List[Tuple[bool, int, int]] = field(default_factory=list)
    #: Phase 4, per way: (seconds, bytes rewritten) of each round.
    one_compaction: Dict[str, List[Tuple[float, int]]] = field(default_factory=dict)

    def median(self, run: str, model: str) -> float:
        return statistics.median(self.dbt[(run, model)])


class Bench:
    def __init__(self, console: Console, rows: int, appends: int) -> None:
        self.console, self.results = console, Results(rows, appends)

    def say(self, text: str) -> None:
        self.console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {text}")

    def dbt_run(self, project: Project, run: Optional[str], *args: str, expect: str) -> None:
        """`dbt run`; each model's execution time recorded under ``run`` (None: not recorded)."""
        wall, _, results = project.dbt("run", *args)
        if not results:
            raise RuntimeError(f"dbt run {' '.join(args)} ran no model")
        for result in results:
            model = result["unique_id"].split(".")[-1]
            message = (result.get("adapter_response") or {}).get("_message") or ""
            if result["status"] != "success" or not message.startswith(expect):
                raise RuntimeError(f"{model}: {result['status']} {message!r}, expected {expect}")
            if run is not None:
                self.results.dbt.setdefault((run, model), []).append(result["execution_time"])
        self.say(f"dbt run {' '.join(args)}: {wall:.1f} s")

    def run(self, root: Path) -> Results:
        from dbt.adapters.dyntable.engines.embedded import EmbeddedEngine

        project = Project(root, "embedded", self.results.rows, None, models())
        engine = EmbeddedEngine(project.warehouse).start()
        try:
            Fact(engine).load(self.results.rows)
        finally:
            engine.stop()
        writer = FactWriter(project.fact_location(), self.results.rows)
        self.dbt_run(project, None, expect="REINITIALIZE")
        self.history(project, writer)
        self.one_compaction(project.warehouse / DT_SCHEMA / UNCOMPACTED, root.parent / "copies")
        for _ in range(DBT_RUNS):
            for twin in TWINS:
                writer.insert(INSERTED)
                self.dbt_run(project, "incremental", "--select", f"{twin}+", expect="INCREMENTAL")
        for _ in range(DBT_RUNS):
            for twin in TWINS:
                downstream = DOWNSTREAM[twin]
                self.dbt_run(
                    project, "rebuild", "--full-refresh", "--select", downstream, expect="REINITIALIZE"
                )
        self.source_compactions(project, writer)
        return self.results

    def history(self, project: Project, writer: FactWriter) -> None:
        from deltalake import DeltaTable

        from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService
        from dbt.adapters.dyntable.engines.embedded import EmbeddedEngine
        from dbt.adapters.dyntable.runner.backend import ServiceBackend
        from dbt.adapters.dyntable.runner.graph import build_graph
        from dbt.adapters.dyntable.runner.project import ProjectOptions, load_project
        from dbt.adapters.dyntable.runner.scheduler import Scheduler

        loaded = load_project(ProjectOptions(project.root, project.root, project.engine))
        if loaded.problems:
            raise RuntimeError(f"the project does not load: {loaded.problems}")
        engine = EmbeddedEngine(project.warehouse).start()
        try:
            service = DynamicTableService(engine, project.warehouse, META_SCHEMA)
            graph = build_graph(list(loaded.nodes))
            scheduler = Scheduler(graph, ServiceBackend(service))
            ticks = self.results.tick_seconds
            for tick in range(self.results.appends):
                writer.insert(COMMIT_ROWS)
                outcomes = scheduler.execute(scheduler.dispatch(int(time.time() * 1000), roots=graph.order))
                bad = [o for o in outcomes if str(o.state) != "SUCCEEDED" or str(o.action) != "INCREMENTAL"]
                if bad:
                    raise RuntimeError(
                        f"tick {tick}: {[(o.model, o.action, o.state, o.message) for o in bad]}"
                    )
                for outcome in outcomes:
                    ticks.setdefault(outcome.model, []).append(outcome.seconds)
                if tick % 100 == 99:
                    self.say(f"history: {tick + 1} ticks")
        finally:
            engine.stop()
        for twin in TWINS:
            messages = history_column(project, twin, "state_message")
            self.results.compactions[twin] = sum(1 for m in messages if (m or "").startswith("compacted"))
            self.results.files[twin] = len(DeltaTable(str(project.warehouse / DT_SCHEMA / twin)).file_uris())
        self.say(f"history: files {self.results.files}, compactions {self.results.compactions}")
        built, appended, rewritten = written_bytes(project.warehouse / DT_SCHEMA / COMPACTED)
        self.results.built_bytes, self.results.appended_bytes, self.results.rewritten_bytes = (
            built,
            appended,
            rewritten,
        )
        self.say(f"history: {COMPACTED} built {built:,} B, appended {appended:,} B, rewrote {rewritten:,} B")

    def one_compaction(self, table: Path, copies: Path) -> None:
        """Phase 4: ``table`` copied, restored to where 50 files were appended to its first build,
        and compacted both ways, COMPACTION_ROUNDS times each."""
        from deltalake import DeltaTable

        from dbt.adapters.dyntable.delta_log import DeltaLog
        from dbt.adapters.dyntable.dynamic_table.refresh.apply import merge_files
        from dbt.adapters.dyntable.dynamic_table.refresh.compact import compaction_groups

        def size_tier(copy: Path) -> int:
            log = DeltaLog(copy)
            groups = compaction_groups(log.snapshot(log.latest_version()), 2)
            merge_files(DeltaTable(str(copy)), log, groups)
            return sum(f.size_bytes for group in groups for f in group)

        def every_small_file(copy: Path) -> int:
            metrics = DeltaTable(str(copy)).optimize.compact()
            return int(json.loads(metrics["filesRemoved"])["totalSize"])

        log = DeltaLog(table)
        versions = range(log.latest_version() + 1)
        built = next(v for v in versions if log.snapshot(v).files)
        due = next(v for v in versions if len(log.snapshot(v).files) >= len(log.snapshot(built).files) + 50)
        for round_ in range(COMPACTION_ROUNDS):
            for way, compact in (("size tier", size_tier), ("every small file", every_small_file)):
                copy = copies / f"{round_}-{way.replace(' ', '-')}"
                shutil.copytree(table, copy)
                DeltaTable(str(copy)).restore(due)
                started = time.perf_counter()
                rewritten = compact(copy)
                seconds = time.perf_counter() - started
                self.results.one_compaction.setdefault(way, []).append((seconds, rewritten))
                shutil.rmtree(copy)
        self.say(f"one compaction: {self.results.one_compaction}")

    def source_compactions(self, project: Project, writer: FactWriter) -> None:
        from deltalake import DeltaTable

        from dbt.adapters.dyntable.delta_log import DeltaLog

        fact = project.fact_location()
        for round_ in range(2 * DBT_RUNS):
            for _ in range(SMALL_COMMITS):
                writer.insert(COMMIT_ROWS)
            self.dbt_run(project, None, "--select", *TWINS, expect="INCREMENTAL")
            compacted = round_ % 2 == 1
            if compacted:
                DeltaTable(str(fact)).optimize.compact(target_size=writer.loaded_file_bytes)
            writer.insert(INSERTED)
            run = "after a source compaction" if compacted else "after a source insert"
            before = source_version(project, COMPACTED)
            self.dbt_run(project, run, "--select", *TWINS, expect="INCREMENTAL")
            after = source_version(project, COMPACTED)
            log = DeltaLog(fact)
            read = log.interval(before, after)
            old, new = log.snapshot(before).files, log.snapshot(after).files
            difference = [f for p, f in new.items() if p not in old] + [
                f for p, f in old.items() if p not in new
            ]
            self.results.source_reads.append(
                (
                    compacted,
                    (read.added_rows or 0) + (read.removed_rows or 0),
                    sum(f.num_records or 0 for f in difference),
                )
            )


def written_bytes(table: Path) -> Tuple[int, int, int]:
    """From ``table``'s log: the bytes its first data commit added, the bytes later commits that
    change data added, and the bytes compaction commits (no action with ``dataChange``) removed."""
    built = appended = rewritten = 0
    for commit in sorted((table / "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
        files = [a.get("add") or a.get("remove") for a in actions if "add" in a or "remove" in a]
        if files and not any(f["dataChange"] for f in files):
            rewritten += sum(f.get("size") or 0 for f in files if "deletionTimestamp" in f)
            continue
        added = sum(a["add"]["size"] for a in actions if "add" in a)
        if not built:
            built = added
        else:
            appended += added
    return built, appended, rewritten


def history_column(project: Project, model: str, column: str) -> list:
    from deltalake import DeltaTable

    table = DeltaTable(str(project.warehouse / META_SCHEMA / "dynamic_table_refresh_history"))
    rows = table.to_pyarrow_table(columns=["name", column]).to_pylist()
    return [r[column] for r in rows if r["name"] == f"{DT_SCHEMA}.{model}"]


def source_version(project: Project, model: str) -> int:
    """The fact's version the model's frontier consumed."""
    from dbt.adapters.dyntable.dynamic_table.metadata import MetadataStore

    frontier = MetadataStore(project.warehouse / META_SCHEMA, META_SCHEMA).frontier(f"{DT_SCHEMA}.{model}")
    assert frontier is not None
    return frontier.source_versions["bench.fact"]


# -- the report --------------------------------------------------------------------------------------


def ms(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def mb(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"


def trend(seconds: List[float]) -> str:
    first, last = seconds[:TREND_TICKS], seconds[-TREND_TICKS:]
    return f"{ms(statistics.median(first))} → {ms(statistics.median(last))}"


def report(results: Results, command: str) -> Path:
    ticks = results.tick_seconds
    mean = {twin: statistics.mean(ticks[twin]) for twin in TWINS}
    tick_ratio = mean[COMPACTED] / mean[UNCOMPACTED]
    rebuild = {twin: results.median("rebuild", DOWNSTREAM[twin]) for twin in TWINS}
    rebuild_ratio = rebuild[COMPACTED] / rebuild[UNCOMPACTED]
    incremental = {m: results.median("incremental", m) for twin in TWINS for m in (twin, DOWNSTREAM[twin])}
    source = {
        run: statistics.median([t for twin in TWINS for t in results.dbt[(run, twin)]])
        for run in ("after a source insert", "after a source compaction")
    }
    source_ratio = source["after a source compaction"] / source["after a source insert"]
    compacted_reads = [(read, diff) for was, read, diff in results.source_reads if was]
    tier_bound = math.log2(max(results.compactions[COMPACTED], 1)) + 1
    compaction = {
        way: statistics.median(t for t, _ in rounds) for way, rounds in results.one_compaction.items()
    }
    compaction_ratio = compaction["size tier"] / compaction["every small file"]
    read_only_changes = all(read == INSERTED for read, _ in compacted_reads)
    goals = [
        Goal(
            f"an append-only DT compacting its small files refreshes within {WITHIN}× of one that never "
            "does, its compactions included (mean refresh)",
            f"{tick_ratio:.2f}× ({ms(mean[COMPACTED])} vs {ms(mean[UNCOMPACTED])}, "
            f"{results.compactions[COMPACTED]} compactions in {results.appends} refreshes)",
            tick_ratio <= WITHIN,
        ),
        Goal(
            "its compactions rewrite the files its refreshes appended, not its first build: bytes "
            "rewritten ≤ the appended bytes × (log2 of the compactions + 1), a size tier's bound",
            f"{results.rewritten_bytes / max(results.appended_bytes, 1):.1f}× ({mb(results.rewritten_bytes)} "
            f"rewritten, {mb(results.appended_bytes)} appended, first build {mb(results.built_bytes)}; "
            f"bound {tier_bound:.1f}×)",
            results.rewritten_bytes <= tier_bound * results.appended_bytes,
        ),
        Goal(
            "one compaction of the same DT (its first build and the files appended since) takes "
            "less than half the time of deltalake's optimize.compact, which merges every small file",
            f"{compaction_ratio:.2f}× ({ms(compaction['size tier'])} vs {ms(compaction['every small file'])})",
            compaction_ratio < 0.5,
        ),
        Goal(
            "a rebuild of a DT downstream of it costs less than over the uncompacted twin",
            f"{rebuild_ratio:.2f}× ({ms(rebuild[COMPACTED])} vs {ms(rebuild[UNCOMPACTED])}; upstream "
            f"{results.files[COMPACTED]} vs {results.files[UNCOMPACTED]} files)",
            rebuild_ratio < 1,
        ),
        Goal(
            f"a refresh after its source was compacted costs within {WITHIN}× of one after an insert alone",
            f"{source_ratio:.2f}× ({ms(source['after a source compaction'])} vs "
            f"{ms(source['after a source insert'])})",
            source_ratio <= WITHIN,
        ),
        Goal(
            "it reads the rows inserted, not the files the compaction rewrote",
            ", ".join(
                f"{read:,} rows read (file-set difference: {diff:,})" for read, diff in compacted_reads
            ),
            read_only_changes,
        ),
    ]
    body = ["## History phase", ""]
    body += markdown_table(
        [
            "DT",
            "auto_compact",
            "files after",
            "compactions",
            "median refresh",
            "mean refresh",
            "max refresh",
            f"median, first → last {TREND_TICKS} ticks",
        ],
        [
            (
                twin,
                TWINS[twin],
                results.files[twin],
                results.compactions[twin],
                ms(statistics.median(ticks[twin])),
                ms(mean[twin]),
                ms(max(ticks[twin])),
                trend(ticks[twin]),
            )
            for twin in TWINS
        ]
        + [
            (
                DOWNSTREAM[twin],
                "true",
                "–",
                "–",
                ms(statistics.median(ticks[DOWNSTREAM[twin]])),
                ms(statistics.mean(ticks[DOWNSTREAM[twin]])),
                ms(max(ticks[DOWNSTREAM[twin]])),
                trend(ticks[DOWNSTREAM[twin]]),
            )
            for twin in TWINS
        ],
    )
    body += ["", "## Through `dbt run` (median model execution time)", ""]
    body += markdown_table(
        ["run", "over the compacted DT", "over the uncompacted DT", "ratio"],
        [
            (
                "INCREMENTAL of the twin",
                ms(incremental[COMPACTED]),
                ms(incremental[UNCOMPACTED]),
                f"{incremental[COMPACTED] / incremental[UNCOMPACTED]:.2f}×",
            ),
            (
                "INCREMENTAL of its downstream DT",
                ms(incremental[DOWNSTREAM[COMPACTED]]),
                ms(incremental[DOWNSTREAM[UNCOMPACTED]]),
                f"{incremental[DOWNSTREAM[COMPACTED]] / incremental[DOWNSTREAM[UNCOMPACTED]]:.2f}×",
            ),
            (
                "`--full-refresh` of its downstream DT",
                ms(rebuild[COMPACTED]),
                ms(rebuild[UNCOMPACTED]),
                f"{rebuild_ratio:.2f}×",
            ),
        ],
    )
    body += ["", f"## One compaction, two ways (copies of {UNCOMPACTED}, median of {COMPACTION_ROUNDS})", ""]
    body += markdown_table(
        ["compaction", "time", "bytes rewritten"],
        [
            (way, ms(compaction[way]), mb(int(statistics.median(b for _, b in rounds))))
            for way, rounds in results.one_compaction.items()
        ],
    )
    body += ["", "## A source compacted by its owner", ""]
    body += markdown_table(
        ["run", "median INCREMENTAL (both twins)", "fact rows read, per run", "file-set difference rows"],
        [
            (
                run,
                ms(source[run]),
                ", ".join(f"{read:,}" for was, read, _ in results.source_reads if was == compacted),
                ", ".join(f"{diff:,}" for was, _, diff in results.source_reads if was == compacted),
            )
            for run, compacted in (("after a source insert", False), ("after a source compaction", True))
        ],
    )
    plot(results)
    body += ["", "![refresh times of the history phase](compaction.png)"]
    intro = (
        f"{results.rows:,}-row fact, embedded engine. {results.appends} history refreshes of "
        f"{COMMIT_ROWS} appended rows each; dbt runs after {INSERTED:,} inserted rows, "
        f"{DBT_RUNS} per figure. How it is measured: the module docstring of benchmarks/compaction.py."
    )
    return write_results(NAME, TITLE, command, intro, goals, body)


def plot(results: Results) -> None:
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(9, 4))
    for twin in TWINS:
        axis.plot(
            [t * 1000 for t in results.tick_seconds[twin]],
            label=f"{twin} (auto_compact={TWINS[twin]})",
            lw=0.8,
        )
    axis.set_xlabel("refresh (one per runner tick, 100 rows appended before each)")
    axis.set_ylabel("refresh time (ms)")
    axis.set_title("An append-only DT, compacted and not")
    axis.legend()
    figure.tight_layout()
    figure.savefig(RESULTS / f"{NAME}.png", dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--appends", type=int, default=500)
    args = parser.parse_args()
    console = Console()
    with tempfile.TemporaryDirectory(prefix="dyntable-compaction-") as folder:
        results = Bench(console, args.rows, args.appends).run(Path(folder) / "project")
    path = report(results, "python -m benchmarks.compaction")
    console.print(path.read_text())


if __name__ == "__main__":
    main()
