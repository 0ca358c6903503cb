"""Compaction (docs/ARCHITECTURE.md, "Compaction"): what a dynamic table's small files cost the user,
what compacting them costs, and what a source compacted by its owner costs, through `dbt run`, side
by side in one run on the embedded engine.

A dbt project (fact_project.FactProject, run through the venv's executables) over the fact of data.py: the
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
from typing import Any, Dict, List, Optional, Tuple

from rich.console import Console

from benchmarks.common import RESULTS, Goal, markdown_table, ms, pyplot, say, write_results
from benchmarks.data import SHAPES
from benchmarks.dbt_project import META_SCHEMA, RunnerTicks, in_process_service
from benchmarks.fact_project import DT_SCHEMA, FactProject, FactWriter, with_sources

NAME = "compaction"
TITLE = "Compaction: a DT's small files, its compactions, and a source compacted by its owner"
COMPACTED, UNCOMPACTED = "dt_appended_compacted", "dt_appended_uncompacted"
TWINS = {COMPACTED: "true", UNCOMPACTED: "false"}
DOWNSTREAM = {COMPACTED: "dt_by_customer_compacted", UNCOMPACTED: "dt_by_customer_uncompacted"}
COMMIT_ROWS = 100
INSERTED = 1_000
DBT_RUNS = 3
SMALL_COMMITS = 50
COMPACTION_ROUNDS = 3
#: Files appended to a DT's first build when its first compaction falls due: two a refresh, so
#: phase 4 needs more than half as many history ticks (it restores a copy to that version).
DUE_FILES = 50
WITHIN = 1.2
#: The history phase's first and last ticks compared: what a refresh costs as the DTs' logs and
#: the fact's grow by a commit a tick.
TREND_TICKS = 50
AFTER_INSERT, AFTER_COMPACTION = "after a source insert", "after a source compaction"


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
        say(self.console, text)

    def dbt_run(self, project: FactProject, run: Optional[str], *args: str, expect: str) -> None:
        """`dbt run`; each model's execution time recorded under ``run`` (None: not recorded)."""
        command, results = project.dbt("run", *args)
        if not results:
            raise RuntimeError(f"dbt run {' '.join(args)} ran no model")
        for result in results:
            if result.status != "success" or not result.adapter_message.startswith(expect):
                raise RuntimeError(
                    f"{result.model}: {result.status} {result.adapter_message!r}, expected {expect}"
                )
            if run is not None:
                self.results.dbt.setdefault((run, result.model), []).append(result.execution_time)
        self.say(f"dbt run {' '.join(args)}: {command.wall:.1f} s")

    def run(self, root: Path) -> Results:
        project = FactProject(root, "embedded", self.results.rows, None, models())
        project.load_embedded()
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

    def history(self, project: FactProject, writer: FactWriter) -> None:
        """Phase 1: a runner tick after each append, then the twins' files and bytes."""
        with in_process_service(project) as (loaded, service):
            ticks = RunnerTicks(service, loaded.nodes)
            for tick in range(self.results.appends):
                writer.insert(COMMIT_ROWS)
                outcomes = ticks.tick()
                bad = [o for o in outcomes if str(o.state) != "SUCCEEDED" or str(o.action) != "INCREMENTAL"]
                if bad:
                    raise RuntimeError(
                        f"tick {tick}: {[(o.model, o.action, o.state, o.message) for o in bad]}"
                    )
                for outcome in outcomes:
                    self.results.tick_seconds.setdefault(outcome.model, []).append(outcome.seconds)
                if tick % 100 == 99:
                    self.say(f"history: {tick + 1} ticks")
        self.count_files(project)

    def count_files(self, project: FactProject) -> None:
        """The twins' live files and compactions after the history phase; the bytes the compacted
        twin's log says were built, appended and rewritten."""
        from deltalake import DeltaTable

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
        from dbt.adapters.dyntable.dynamic_table.refresh.compact import compaction_groups, merge_files

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
        due = next(
            v for v in versions if len(log.snapshot(v).files) >= len(log.snapshot(built).files) + DUE_FILES
        )
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

    def source_compactions(self, project: FactProject, writer: FactWriter) -> None:
        """Phase 3: rounds of small appends, every other one compacted by the fact's owner before
        the measured run; what each measured refresh read of the fact."""
        from deltalake import DeltaTable

        fact = project.fact_location()
        for round_ in range(2 * DBT_RUNS):
            for _ in range(SMALL_COMMITS):
                writer.insert(COMMIT_ROWS)
            self.dbt_run(project, None, "--select", *TWINS, expect="INCREMENTAL")
            compacted = round_ % 2 == 1
            if compacted:
                DeltaTable(str(fact)).optimize.compact(target_size=writer.loaded_file_bytes)
            writer.insert(INSERTED)
            before = source_version(project, COMPACTED)
            self.dbt_run(
                project,
                AFTER_COMPACTION if compacted else AFTER_INSERT,
                "--select",
                *TWINS,
                expect="INCREMENTAL",
            )
            after = source_version(project, COMPACTED)
            self.results.source_reads.append((compacted, *rows_read(fact, before, after)))


def rows_read(fact: Path, before: int, after: int) -> Tuple[int, int]:
    """The rows an interval of ``fact`` reads, and the rows of its end snapshots' file-set
    difference (what a reader that does not take compactions out of an interval reads)."""
    from dbt.adapters.dyntable.delta_log import DeltaLog

    log = DeltaLog(fact)
    read = log.interval(before, after)
    old, new = log.snapshot(before).files, log.snapshot(after).files
    difference = [f for p, f in new.items() if p not in old] + [f for p, f in old.items() if p not in new]
    return (read.added_rows or 0) + (read.removed_rows or 0), sum(f.num_records or 0 for f in difference)


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


def history_column(project: FactProject, model: str, column: str) -> List[Any]:
    rows = project.refresh_history(columns=["name", column])
    return [r[column] for r in rows if r["name"] == f"{DT_SCHEMA}.{model}"]


def source_version(project: FactProject, model: str) -> int:
    """The fact's version the model's frontier consumed."""
    from dbt.adapters.dyntable.dynamic_table.metadata import MetadataStore

    frontier = MetadataStore(project.warehouse / META_SCHEMA, META_SCHEMA).frontier(f"{DT_SCHEMA}.{model}")
    assert frontier is not None
    return frontier.source_versions["bench.fact"]


# -- the report --------------------------------------------------------------------------------------


def mb(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"


def trend(seconds: List[float]) -> str:
    first, last = seconds[:TREND_TICKS], seconds[-TREND_TICKS:]
    return f"{ms(statistics.median(first))} → {ms(statistics.median(last))}"


@dataclass
class Figures:
    """What the goals and the tables compare, from the results."""

    #: Per twin, its mean refresh in the history phase.
    mean: Dict[str, float]
    #: Per twin, the median `--full-refresh` of the DT downstream of it.
    rebuild: Dict[str, float]
    #: Per twin and downstream DT, its median INCREMENTAL through dbt.
    incremental: Dict[str, float]
    #: Per phase-3 run, the twins' median INCREMENTAL.
    source: Dict[str, float]
    #: Per way of compacting, its median time.
    compaction: Dict[str, float]

    @classmethod
    def of(cls, results: Results) -> "Figures":
        return cls(
            {twin: statistics.mean(results.tick_seconds[twin]) for twin in TWINS},
            {twin: results.median("rebuild", DOWNSTREAM[twin]) for twin in TWINS},
            {m: results.median("incremental", m) for twin in TWINS for m in (twin, DOWNSTREAM[twin])},
            {
                run: statistics.median([t for twin in TWINS for t in results.dbt[(run, twin)]])
                for run in (AFTER_INSERT, AFTER_COMPACTION)
            },
            {way: statistics.median(t for t, _ in rounds) for way, rounds in results.one_compaction.items()},
        )


def goals(results: Results, f: Figures) -> List[Goal]:
    tick_ratio = f.mean[COMPACTED] / f.mean[UNCOMPACTED]
    rebuild_ratio = f.rebuild[COMPACTED] / f.rebuild[UNCOMPACTED]
    source_ratio = f.source[AFTER_COMPACTION] / f.source[AFTER_INSERT]
    compaction_ratio = f.compaction["size tier"] / f.compaction["every small file"]
    compacted_reads = [(read, diff) for was, read, diff in results.source_reads if was]
    tier_bound = math.log2(max(results.compactions[COMPACTED], 1)) + 1
    return [
        Goal(
            f"an append-only DT compacting its small files refreshes within {WITHIN}× of one that never "
            "does, its compactions included (mean refresh)",
            f"{tick_ratio:.2f}× ({ms(f.mean[COMPACTED])} vs {ms(f.mean[UNCOMPACTED])}, "
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
            f"{compaction_ratio:.2f}× ({ms(f.compaction['size tier'])} vs {ms(f.compaction['every small file'])})",
            compaction_ratio < 0.5,
        ),
        Goal(
            "a rebuild of a DT downstream of it costs less than over the uncompacted twin",
            f"{rebuild_ratio:.2f}× ({ms(f.rebuild[COMPACTED])} vs {ms(f.rebuild[UNCOMPACTED])}; upstream "
            f"{results.files[COMPACTED]} vs {results.files[UNCOMPACTED]} files)",
            rebuild_ratio < 1,
        ),
        Goal(
            f"a refresh after its source was compacted costs within {WITHIN}× of one after an insert alone",
            f"{source_ratio:.2f}× ({ms(f.source[AFTER_COMPACTION])} vs {ms(f.source[AFTER_INSERT])})",
            source_ratio <= WITHIN,
        ),
        Goal(
            "it reads the rows inserted, not the files the compaction rewrote",
            ", ".join(
                f"{read:,} rows read (file-set difference: {diff:,})" for read, diff in compacted_reads
            ),
            all(read == INSERTED for read, _ in compacted_reads),
        ),
    ]


def history_table(results: Results, f: Figures) -> List[str]:
    ticks = results.tick_seconds

    def row(model: str, auto_compact: str, files: object, compactions: object) -> Tuple[object, ...]:
        seconds = ticks[model]
        return (
            model,
            auto_compact,
            files,
            compactions,
            ms(statistics.median(seconds)),
            ms(statistics.mean(seconds)),
            ms(max(seconds)),
            trend(seconds),
        )

    header = ["DT", "auto_compact", "files after", "compactions", "median refresh", "mean refresh"]
    header += ["max refresh", f"median, first → last {TREND_TICKS} ticks"]
    rows = [row(twin, TWINS[twin], results.files[twin], results.compactions[twin]) for twin in TWINS]
    rows += [row(DOWNSTREAM[twin], "true", "–", "–") for twin in TWINS]
    return ["## History phase", ""] + markdown_table(header, rows)


def dbt_table(f: Figures) -> List[str]:
    def row(run: str, figures: Dict[str, float], compacted: str, uncompacted: str) -> Tuple[str, ...]:
        return (
            run,
            ms(figures[compacted]),
            ms(figures[uncompacted]),
            f"{figures[compacted] / figures[uncompacted]:.2f}×",
        )

    rows = [
        row("INCREMENTAL of the twin", f.incremental, COMPACTED, UNCOMPACTED),
        row(
            "INCREMENTAL of its downstream DT", f.incremental, DOWNSTREAM[COMPACTED], DOWNSTREAM[UNCOMPACTED]
        ),
        row("`--full-refresh` of its downstream DT", f.rebuild, COMPACTED, UNCOMPACTED),
    ]
    return ["", "## Through `dbt run` (median model execution time)", ""] + markdown_table(
        ["run", "over the compacted DT", "over the uncompacted DT", "ratio"], rows
    )


def compaction_tables(results: Results, f: Figures) -> List[str]:
    """Phase 4's one compaction two ways, and phase 3's source compacted by its owner."""
    lines = ["", f"## One compaction, two ways (copies of {UNCOMPACTED}, median of {COMPACTION_ROUNDS})", ""]
    lines += markdown_table(
        ["compaction", "time", "bytes rewritten"],
        [
            (way, ms(f.compaction[way]), mb(int(statistics.median(b for _, b in rounds))))
            for way, rounds in results.one_compaction.items()
        ],
    )
    lines += ["", "## A source compacted by its owner", ""]
    return lines + markdown_table(
        ["run", "median INCREMENTAL (both twins)", "fact rows read, per run", "file-set difference rows"],
        [
            (
                run,
                ms(f.source[run]),
                ", ".join(f"{read:,}" for was, read, _ in results.source_reads if was == compacted),
                ", ".join(f"{diff:,}" for was, _, diff in results.source_reads if was == compacted),
            )
            for run, compacted in ((AFTER_INSERT, False), (AFTER_COMPACTION, True))
        ],
    )


def report(results: Results, command: str) -> Path:
    f = Figures.of(results)
    body = history_table(results, f) + dbt_table(f) + compaction_tables(results, f)
    plot(results)
    body += ["", "![refresh times of the history phase](compaction.png)"]
    intro = (
        f"{results.rows:,}-row fact, embedded engine. {results.appends} history refreshes of "
        f"{COMMIT_ROWS} appended rows each; dbt runs after {INSERTED:,} inserted rows, "
        f"{DBT_RUNS} per figure. How it is measured: the module docstring of benchmarks/compaction.py."
    )
    return write_results(NAME, TITLE, command, intro, goals(results, f), body)


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
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--appends", type=int, default=500)
    args = parser.parse_args()
    if args.appends <= DUE_FILES // 2:
        parser.error(
            f"--appends must be over {DUE_FILES // 2}: phase 4 restores the DT to its {DUE_FILES}th "
            "appended file (two a tick)"
        )
    console = Console()
    with tempfile.TemporaryDirectory(prefix="dyntable-compaction-") as folder:
        results = Bench(console, args.rows, args.appends).run(Path(folder) / "project")
    path = report(results, "python -m benchmarks.compaction")
    console.print(path.read_text())


if __name__ == "__main__":
    main()
