"""What user_cost measured: every model's time in every run, every command, the warehouse after the
history phase; saved to results/user_cost.json so a report can be rewritten (--report-only) and a
run of some engines and sizes can keep the others' (--keep-unmeasured)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import (
    Any,
    Callable,
    ClassVar,
    Dict,
    Iterable,
    List,
    Optional,
    ParamSpec,
    Protocol,
    Set,
    Tuple,
    TypeVar,
)

from benchmarks.common import SavedResults, millions
from benchmarks.user_cost.parameters import AFTER_ONE, ENGINE_NAMES


@dataclass
class Measure:
    engine: str
    rows: int
    via: str  # dbt | runner | in-process
    run: str  # which run: no-data, incremental, sweep, full-refresh, create
    history: str  # AFTER_ONE, AFTER_ONE_IN_TURNS or AFTER_MANY
    model: str
    action: str
    seconds: float  # dbt: execution_time; runner: the history row's duration; in-process: wall
    refresh: Optional[float] = None  # dbt: the refresh's own duration, from the refresh history
    first: bool = False  # the first DT the process refreshed
    jobs: Optional[int] = None  # JVM Spark: Spark jobs started while the model ran (its event log)


@dataclass
class Invocation:
    engine: str
    rows: int
    label: str
    command: str
    wall: float
    load: float = 0.0  # the machine's 1-min load average when it started


@dataclass
class HistoryState:
    """What the warehouse holds after the history phase (what a long-running user has)."""

    engine: str
    rows: int
    ticks: int
    seconds: float
    history_rows: int
    frontier_commits: int
    frontier_files: int
    history_files: int
    fact_version: int
    dt_version: int
    checkpoints: str = ""
    tick_times: List[Tuple[int, str, float]] = field(default_factory=list)  # (refreshes, action, s)


class _OfEngineAndSize(Protocol):
    engine: str
    rows: int


_Kept = TypeVar("_Kept", bound=_OfEngineAndSize)
_Selection = ParamSpec("_Selection")


def _median_seconds(pick: Callable[_Selection, List[Measure]]) -> Callable[_Selection, Optional[float]]:
    """``pick``, answering the median seconds of what it picks; None where it picks nothing."""

    def median(*args: _Selection.args, **kwargs: _Selection.kwargs) -> Optional[float]:
        found = pick(*args, **kwargs)
        return statistics.median(m.seconds for m in found) if found else None

    return median


@dataclass
class Results(SavedResults):
    sizes: List[int]
    history_sizes: List[int]
    measures: List[Measure] = field(default_factory=list)
    invocations: List[Invocation] = field(default_factory=list)
    histories: List[HistoryState] = field(default_factory=list)
    jvm_sizes: List[int] = field(default_factory=list)
    jvm_skipped: Optional[str] = None
    failures: List[str] = field(default_factory=list)
    #: When each engine and fact size was measured ("embedded 1000000" → UTC minute): a run with
    #: --keep-unmeasured keeps other runs' rows, and the report says from when.
    measured_at: Dict[str, str] = field(default_factory=dict)
    #: The command that measured them (a report rewritten with --report-only names it).
    command: str = ""

    ITEMS: ClassVar[Dict[str, Callable[[Dict[str, Any]], Any]]] = {
        "measures": lambda m: Measure(**m),
        "invocations": lambda i: Invocation(**i),
        "histories": lambda h: HistoryState(**{**h, "tick_times": [tuple(t) for t in h["tick_times"]]}),
    }

    def keeping(self, earlier: "Results", measured: Set[Tuple[str, int]]) -> "Results":
        """These results, with ``earlier``'s of the (engine, fact rows) pairs not ``measured``
        this time."""

        def kept(items: List[_Kept]) -> List[_Kept]:
            return [i for i in items if (i.engine, i.rows) not in measured]

        def failure_kept(failure: str) -> bool:
            return not any(failure.startswith(f"{engine}, {rows:,} rows") for engine, rows in measured)

        jvm_measured = any(engine == "jvm" for engine, _ in measured)
        return Results(
            sorted(set(self.sizes) | set(earlier.sizes)),
            sorted(set(self.history_sizes) | set(earlier.history_sizes)),
            kept(earlier.measures) + self.measures,
            kept(earlier.invocations) + self.invocations,
            kept(earlier.histories) + self.histories,
            sorted(set(self.jvm_sizes) | set(earlier.jvm_sizes)),
            self.jvm_skipped if jvm_measured else earlier.jvm_skipped,
            [f for f in earlier.failures if failure_kept(f)] + self.failures,
            {
                **{k: v for k, v in earlier.measured_at.items() if k not in self.measured_at},
                **self.measured_at,
            },
            self.command,
        )

    def when_measured(self) -> str:
        """A sentence naming when each engine and size was measured, where that differs."""
        if len(set(self.measured_at.values())) < 2:
            return ""
        by_time: Dict[str, List[str]] = {}
        for key in sorted(self.measured_at, key=lambda k: (k.split()[0], int(k.split()[1]))):
            engine, rows = key.split()
            by_time.setdefault(self.measured_at[key], []).append(
                f"{ENGINE_NAMES[engine]} {millions(int(rows))}"
            )
        parts = [f"{', '.join(pairs)} on {when} UTC" for when, pairs in sorted(by_time.items(), reverse=True)]
        return "Measured: " + "; ".join(parts) + " (the older kept by `--keep-unmeasured`)."

    def pick(
        self,
        engine: str,
        rows: int,
        via: str,
        run: str,
        history: str = AFTER_ONE,
        models: Optional[Iterable[str]] = None,
        action: Optional[str] = None,
    ) -> List[Measure]:
        wanted = set(models) if models is not None else None
        return [
            m
            for m in self.measures
            if m.engine == engine
            and m.rows == rows
            and m.via == via
            and m.run == run
            and m.history == history
            and (wanted is None or m.model in wanted)
            and (action is None or m.action == action)
        ]

    #: The median seconds of what :meth:`pick` picks; None where it picks nothing.
    median = _median_seconds(pick)
