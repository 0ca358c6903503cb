"""What every benchmark shares: the results folder, goal rows, timing, the warehouse, plots.

Each benchmark writes ``results/<name>.md`` (a table marking each goal met ✓ or missed ✗ with the
real number, then its measurements) and ``results/<name>.goals.json`` (the same goal rows, the
command and when it ran, which ``benchmarks/run.py`` gathers into ``results/SUMMARY.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    ClassVar,
    Dict,
    Iterator,
    List,
    Optional,
    Sequence,
    Tuple,
    Type,
    TypeVar,
)

from rich.console import Console

if TYPE_CHECKING:
    from dbt.adapters.dyntable.dynamic_table.config import DynamicTableConfig
    from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService
    from dbt.adapters.dyntable.engines.embedded import EmbeddedEngine
    from dbt.adapters.dyntable.engines.jvm import JvmSparkEngine

#: benchmarks/results, the real runs' results (committed); a trial run (a smoke run after a change,
#: other sizes) names a folder of its own in DYNTABLE_BENCH_RESULTS so as not to write over them.
RESULTS = Path(os.environ.get("DYNTABLE_BENCH_RESULTS") or Path(__file__).parent / "results")


@dataclass
class Goal:
    """One goal of issue 6 and what this run measured against it (``met`` None: not measurable
    here, e.g. a profile that was not run)."""

    goal: str
    measured: str
    met: Optional[bool]

    @property
    def mark(self) -> str:
        return {True: "✓ met", False: "✗ missed", None: "– not measured"}[self.met]


SavedResultsT = TypeVar("SavedResultsT", bound="SavedResults")


class SavedResults:
    """A benchmark's measurements as JSON: saved after a run, loaded to rewrite its report or to
    keep what a later run did not measure. Subclasses are dataclasses; ``ITEMS`` says how to build
    the items of their list fields that hold dataclasses, from each item's JSON object."""

    ITEMS: ClassVar[Dict[str, Callable[[Dict[str, Any]], Any]]] = {}

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=0) + "\n")  # type: ignore[call-overload]

    @classmethod
    def load(cls: Type[SavedResultsT], path: Path) -> SavedResultsT:
        raw = json.loads(path.read_text())
        for name, build in cls.ITEMS.items():
            raw[name] = [build(item) for item in raw[name]]
        return cls(**raw)


@dataclass
class Timing:
    wall: float
    cpu: float


@contextmanager
def timed() -> Iterator[Timing]:
    """Wall and process CPU seconds of the block (the embedded engine runs in this process, so
    process CPU includes the engine's work)."""
    timing = Timing(0.0, 0.0)
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        yield timing
    finally:
        timing.wall = time.perf_counter() - wall
        timing.cpu = time.process_time() - cpu


@contextmanager
def embedded_engine(port: int = 0) -> Iterator[Tuple["EmbeddedEngine", Path]]:
    """A fresh warehouse in a temp folder and the embedded engine on it: ``(engine, warehouse)``;
    with a ``port``, its server runs in this process."""
    from dbt.adapters.dyntable.engines.embedded import EmbeddedEngine

    warehouse = Path(tempfile.mkdtemp(prefix="dyntable-bench-"))
    engine = EmbeddedEngine(warehouse, port=port).start()
    try:
        yield engine, warehouse
    finally:
        engine.stop()
        shutil.rmtree(warehouse, ignore_errors=True)


def events_service(
    engine: "EmbeddedEngine", warehouse: Path, events: Path
) -> Tuple["DynamicTableService", "DynamicTableConfig"]:
    """The Delta table at ``events`` registered as ``raw.events``, a schema ``app`` for DTs, and
    the service and incremental config that refresh them in this process."""
    from dbt.adapters.dyntable.dynamic_table.config import DynamicTableConfig
    from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService

    engine.execute("create schema if not exists raw")
    engine.execute(f"create table raw.events using delta location '{events}'")
    engine.execute("create schema if not exists app")
    service = DynamicTableService(engine, warehouse, "dyntable_meta")
    config = DynamicTableConfig.from_model("bench", {"target_lag": "1 minute", "refresh_mode": "incremental"})
    return service, config


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]], align: str = "") -> List[str]:
    """``align``: one letter per column, l or r (default: first column left, the rest right)."""
    align = align or "l" + "r" * (len(header) - 1)
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" if a == "l" else "---:" for a in align) + "|",
        *("| " + " | ".join(str(c) for c in row) + " |" for row in rows),
    ]


def write_results(
    name: str, title: str, command: str, intro: str, goals: List[Goal], body: List[str]
) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]
    produced = utc_minute()
    lines = [
        f"# {title}",
        "",
        f"Produced by `{command}` on {produced} UTC, "
        f"{os.cpu_count()} cores, 1-min load average {load:.2f} at the end of the run.",
        "",
        intro,
        "",
    ]
    if goals:
        lines += ["## Goals", ""]
        lines += markdown_table(
            ["goal", "measured", ""], [(g.goal, g.measured, g.mark) for g in goals], "lll"
        )
        lines.append("")
    lines += body
    path = RESULTS / f"{name}.md"
    path.write_text("\n".join(lines).rstrip() + "\n")
    write_goals(name, title, command, produced, goals, load)
    return path


def command_line(module: str, full: bool, sizes: Optional[Sequence[int]], *more: str) -> str:
    """How a run was asked for, as its report says: the module, ``--full``, ``--sizes`` and ``more``."""
    words = [f"python -m benchmarks.{module}"] + (["--full"] if full else [])
    words += ["--sizes", *map(str, sizes)] if sizes else []
    return " ".join([*words, *more])


def utc_minute() -> str:
    """Now, as the results name when a run was: the UTC minute."""
    return f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M}"


def write_goals(
    name: str, title: str, command: str, produced: str, goals: List[Goal], load: Optional[float] = None
) -> None:
    """``results/<name>.goals.json``: what SUMMARY.md gathers of a benchmark's run."""
    record: Dict[str, Any] = {"title": title, "command": command, "produced": produced}
    if load is not None:
        record["load"] = round(load, 2)
    record["goals"] = [asdict(g) for g in goals]
    (RESULTS / f"{name}.goals.json").write_text(json.dumps(record, indent=1) + "\n")


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (files only, no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def seconds(value: float) -> str:
    return f"{value:.3f}" if value < 10 else f"{value:.1f}"


def percent(fraction: float) -> str:
    """A change fraction as the tables print it (0.001% at 100M rows stays readable)."""
    return f"{fraction:.3%}" if fraction < 0.0001 else f"{fraction:.2%}"


def ms(value: Optional[float]) -> str:
    """A duration as the reports print it: milliseconds under a second, else seconds; – not measured."""
    return "–" if value is None else f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def millions(rows: int) -> str:
    """A row count as the reports name a size: 1M, 0.1M, 100M."""
    return f"{rows / 1e6:g}M"


def docstring_paragraphs(doc: Optional[str], *indexes: int) -> List[str]:
    """Paragraphs of a benchmark's docstring, each on one line: a report's introduction says how it
    was measured in the words of the module that measures it."""
    paragraphs = (doc or "").split("\n\n")
    return [" ".join(paragraphs[i].split()) for i in indexes]


def say(console: Console, text: str) -> None:
    """A progress line, its time first: a benchmark's phases take minutes."""
    console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {text}")


def add_spark_jars_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--spark-jars",
        type=Path,
        default=os.environ.get("DYNTABLE_SPARK_JARS") or None,
        help="a folder of Delta's jars (the profile's `spark_jars`)",
    )


@contextmanager
def jvm_engine(
    spark_jars: Optional[Path], start_timeout: float, prefix: str
) -> Iterator[Tuple[Optional["JvmSparkEngine"], Path, str]]:
    """JVM Spark with Delta on a fresh warehouse in a temp folder: ``(engine, warehouse, "")``, or
    ``(None, warehouse, why)`` where it cannot start (Delta's jars unresolved, no Java), Spark's
    own output left out of why. The engine stopped and the folder removed after."""
    from dbt.adapters.dyntable.engines.base import EngineError
    from dbt.adapters.dyntable.engines.jvm import JvmSparkEngine

    warehouse = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        try:
            engine = JvmSparkEngine(warehouse, spark_jars=spark_jars, start_timeout=start_timeout).start()
        except EngineError as exc:
            yield None, warehouse, str(exc).split("\nSpark said:")[0].strip()
            return
        try:
            yield engine, warehouse, ""
        finally:
            engine.stop()
    finally:
        shutil.rmtree(warehouse, ignore_errors=True)
