"""The dynamic-table graph the runner schedules: effective lags, canonical periods, closures.

Nodes are dynamic tables keyed by their relation name (``schema.table``, lower case). An edge u → d
means d reads u in the same pipeline (directly or through views and other non-DT models): d's
refresh at T needs u's refresh at T (docs/ARCHITECTURE.md, "The semantics contract"). Inputs read
through ``refresh_boundary(ref(...))`` are not edges: they decouple schedules, failures and lags
(docs/ARCHITECTURE.md, "Refresh boundaries").

Periods follow docs/ARCHITECTURE.md, "Scheduling": canonical periods ``unit · 2^n`` (unit 48 s,
shrunk by the runner's time scale), the largest that leaves half the target lag for waiting and
refreshing, and never below an upstream's period, so every DT's data timestamps land on its
upstreams' grid.

>>> from dbt.adapters.dyntable.dynamic_table.config import TargetLag
>>> canonical_period_ms(TargetLag.parse("5 minutes").seconds, 48_000)
96000
>>> canonical_period_ms(60, 48_000)  # below two units: the unit, the fastest the runner goes
48000
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Iterable, List, Optional, Sequence, Set, Tuple

from dbt.adapters.dyntable.dynamic_table.config import TargetLag
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable

#: Seed 000 §5.2: canonical refresh periods are 48·2^n seconds.
CANONICAL_UNIT_MS = 48_000


class GraphError(ValueError):
    """The dynamic-table graph cannot be scheduled; the message names the models and the fix."""


@dataclass(frozen=True)
class GraphNode:
    """One dynamic table and what it reads."""

    model: str
    """The dbt model name (what users type on the command line)."""
    dt: DynamicTable
    upstream: FrozenSet[str] = frozenset()
    """DTs read in the same pipeline: refreshed at the same data timestamp, before this one."""
    boundary_inputs: FrozenSet[str] = frozenset()
    """Relations read across a refresh boundary, at whatever version they have."""
    other_inputs: FrozenSet[str] = frozenset()
    """Sources and non-DT models read (for display; they are never refreshed by the runner)."""
    input_edges: FrozenSet[Tuple[str, str]] = frozenset()
    """The lineage from what it reads to it, (relation read, its reader), through views and other
    models: what the live page's graph draws, as dbt docs' lineage does."""

    @property
    def name(self) -> str:
        return self.dt.name


def canonical_period_ms(lag_seconds: int, unit_ms: int) -> int:
    """The largest ``unit · 2^n`` (n ≥ 0) at most half the lag; the unit if even that is larger."""
    budget_ms = lag_seconds * 1000 // 2
    period = unit_ms
    while period * 2 <= budget_ms:
        period *= 2
    return period


@dataclass
class DynamicTableGraph:
    nodes: Dict[str, GraphNode]
    unit_ms: int = CANONICAL_UNIT_MS
    order: List[str] = field(init=False)
    consumers: Dict[str, Set[str]] = field(init=False)
    effective_lag: Dict[str, Optional[int]] = field(init=False)
    """Seconds; DOWNSTREAM takes its consumers' smallest; None: no consumer, refreshed when asked."""
    period_ms: Dict[str, Optional[int]] = field(init=False)
    lag_source: Dict[str, str] = field(init=False)
    """For DOWNSTREAM DTs, the consumer whose lag they took (for status and errors)."""

    def __post_init__(self) -> None:
        if self.unit_ms <= 0:
            raise GraphError("The canonical period unit must be positive (check --time-scale).")
        self.consumers = {name: set() for name in self.nodes}
        for node in self.nodes.values():
            for up in node.upstream:
                if up not in self.nodes:
                    raise GraphError(f"Model '{node.model}' reads {up}, which is not in the graph.")
                self.consumers[up].add(node.name)
        self.order = self._topological_order()
        self._position = {name: i for i, name in enumerate(self.order)}
        self._resolve_lags()
        self._check_lags()
        self._choose_periods()

    # -- structure -------------------------------------------------------------------------------

    def _topological_order(self) -> List[str]:
        remaining = {name: len(node.upstream) for name, node in self.nodes.items()}
        ready = sorted(name for name, count in remaining.items() if count == 0)
        order: List[str] = []
        while ready:
            name = ready.pop()
            order.append(name)
            for consumer in sorted(self.consumers[name]):
                remaining[consumer] -= 1
                if remaining[consumer] == 0:
                    ready.append(consumer)
        if len(order) < len(self.nodes):
            raise GraphError(
                "The dynamic tables form a cycle: "
                + " → ".join(self.model(n) for n in self._find_cycle(set(self.nodes) - set(order)))
                + ". A dynamic table cannot read itself, even through other models; break the "
                "cycle, or read one side through refresh_boundary(ref(...))."
            )
        return order

    def _find_cycle(self, stuck: Set[str]) -> List[str]:
        """One cycle among the nodes Kahn's algorithm could not order, closed (a → b → a)."""
        start = min(stuck)
        path: List[str] = [start]
        seen = {start: 0}
        while True:
            following = sorted(u for u in self.nodes[path[-1]].upstream if u in stuck)
            step = following[0]
            if step in seen:
                cycle = path[seen[step] :] + [step]
                return list(reversed(cycle))
            seen[step] = len(path)
            path.append(step)

    def model(self, name: str) -> str:
        return self.nodes[name].model

    def upstream(self, name: str) -> FrozenSet[str]:
        return self.nodes[name].upstream

    def by_model(self, model: str) -> GraphNode:
        """The DT a command-line name denotes: a model name or a ``schema.table`` relation."""
        wanted = model.lower()
        found = [n for n in self.nodes.values() if n.model.lower() == wanted or n.name == wanted]
        if len(found) == 1:
            return found[0]
        if not found:
            known = ", ".join(sorted(n.model for n in self.nodes.values())) or "none"
            raise GraphError(f"Unknown dynamic table '{model}'. Dynamic tables in this project: {known}.")
        raise GraphError(
            f"'{model}' names several dynamic tables ({', '.join(sorted(n.name for n in found))}); "
            "use schema.table."
        )

    def closure(self, roots: Iterable[str]) -> List[str]:
        """``roots`` and every DT they read in the same pipeline, in dependency order."""
        members: Set[str] = set()
        pending = list(roots)
        while pending:
            name = pending.pop()
            if name not in members:
                members.add(name)
                pending.extend(self.nodes[name].upstream)
        return sorted(members, key=self._position.__getitem__)

    # -- lags and periods ------------------------------------------------------------------------

    def _resolve_lags(self) -> None:
        self.effective_lag = {}
        self.lag_source = {}
        for name in reversed(self.order):
            declared = self.nodes[name].dt.config.target_lag.seconds
            if declared is not None:
                self.effective_lag[name] = declared
                continue
            candidates = [
                (lag, self.lag_source.get(c, c))
                for c in self.consumers[name]
                if (lag := self.effective_lag[c]) is not None
            ]
            if candidates:
                lag, source = min(candidates, key=lambda item: (item[0], item[1]))
                self.effective_lag[name] = lag
                self.lag_source[name] = source
            else:
                self.effective_lag[name] = None

    def _check_lags(self) -> None:
        """A DT cannot be fresher than a DT it reads in the same pipeline (docs/ARCHITECTURE.md,
        "Refresh boundaries")."""
        # For each DT: the largest declared lag among its transitive upstream DTs, and whose.
        slowest: Dict[str, Optional[Tuple[int, str]]] = {}
        for name in self.order:
            best: Optional[Tuple[int, str]] = None
            for up in self.nodes[name].upstream:
                declared = self.nodes[up].dt.config.target_lag.seconds
                for candidate in (slowest[up], (declared, up) if declared is not None else None):
                    if candidate is not None and (best is None or candidate[0] > best[0]):
                        best = candidate
            slowest[name] = best
            declared = self.nodes[name].dt.config.target_lag.seconds
            lag = self.effective_lag[name]
            if best is None or lag is None or lag >= best[0]:
                continue
            reader, read = self.nodes[name], self.nodes[best[1]]
            why = (
                f"target_lag {reader.dt.config.target_lag}"
                if declared is not None
                else f"target_lag downstream (taken from '{self.model(self.lag_source[name])}': "
                f"{_seconds(lag)})"
            )
            raise GraphError(
                f"Model '{reader.model}': {why} is below the {read.dt.config.target_lag} of its "
                f"upstream dynamic table '{read.model}'. A dynamic table cannot be fresher than what "
                f"it reads: raise the target_lag to at least {read.dt.config.target_lag}, or read "
                f"'{read.model}' through refresh_boundary(ref('{read.model}'))."
            )

    def _choose_periods(self) -> None:
        self.period_ms = {}
        for name in self.order:
            lag = self.effective_lag[name]
            if lag is None:
                self.period_ms[name] = None
                continue
            own = canonical_period_ms(lag, self.unit_ms)
            ups = [p for u in self.nodes[name].upstream if (p := self.period_ms[u]) is not None]
            self.period_ms[name] = max([own] + ups)

    @property
    def scheduled(self) -> List[str]:
        """DTs with a schedule of their own (declared lags), in dependency order. DOWNSTREAM DTs
        refresh when a consumer does; those without consumers only when asked."""
        return [n for n in self.order if self.nodes[n].dt.config.target_lag.seconds is not None]

    @property
    def tick_ms(self) -> Optional[int]:
        """The scheduler's tick: the smallest period (every period is a multiple of it)."""
        periods = [self.period_ms[n] for n in self.scheduled]
        return min(p for p in periods if p is not None) if periods else None


def _seconds(seconds: int) -> str:
    return str(TargetLag(seconds))


def build_graph(nodes: Sequence[GraphNode], unit_ms: int = CANONICAL_UNIT_MS) -> DynamicTableGraph:
    by_name: Dict[str, GraphNode] = {}
    for node in nodes:
        if node.name in by_name:
            raise GraphError(
                f"Models '{by_name[node.name].model}' and '{node.model}' both build {node.name}."
            )
        by_name[node.name] = node
    return DynamicTableGraph(by_name, unit_ms)
