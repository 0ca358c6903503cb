"""What waits in memory for a batch's end (a runner tick, a dbt invocation): the history rows and
the frontiers refreshes reached, the compactions that fell due, and the writer mark that tells
another process this one will still write them (docs/ARCHITECTURE.md, "Metadata tables" and
"Exactly once")."""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any, Dict, List, Optional, Set, Tuple

from dbt.adapters.dyntable.dynamic_table.claims import Claim
from dbt.adapters.dyntable.dynamic_table.locking import WriterMark, writer_alive
from dbt.adapters.dyntable.dynamic_table.metadata.rows import Frontier

Record = Dict[str, Any]


class Batches:
    """The batches open in this process, which may overlap (the runner's ticks run in threads of
    their own): one that ends writes what the others recorded so far too. ``locks``: the folder
    of the writer marks."""

    def __init__(self, locks: str) -> None:
        self.locks = locks
        self._lock = threading.Lock()
        self._depth = 0
        self._pending_history: List[Record] = []
        #: Rows a batch's end took from ``_pending_history`` and is writing: still read from here.
        self._flushing_history: List[Record] = []
        self._pending_frontiers: Dict[str, Frontier] = {}
        #: Of those, the ones NO_DATA refreshes reached without the DT's lease, checked at the
        #: batch's end (docs/ARCHITECTURE.md, "Object storage").
        self._claims: Dict[str, Claim] = {}
        # Held while frontiers are pending, so that another process can tell them from a crash.
        self._mark = WriterMark(locks)
        # Tables whose compaction fell due inside a batch: compacted at its end, not on the
        # refresh that happened to make the commit (see ``defer_compaction``).
        self._due_compactions: Set[str] = set()

    def open(self) -> None:
        with self._lock:
            self._depth += 1

    @property
    def is_open(self) -> bool:
        with self._lock:
            return self._depth > 0

    def defer_history(self, record: Record) -> bool:
        """Keep a history row for the batch's end; False outside a batch (write it at once)."""
        with self._lock:
            if self._depth:
                self._pending_history.append(record)
                return True
        return False

    def defer_frontier(self, frontier: Frontier, claim: Optional[Claim] = None) -> bool:
        """Keep the frontier a refresh reached for the batch's end (a newer one of the same DT
        replaces it: a refresh decided without the lease may end after one that held it); False
        outside a batch (write it at once). ``claim``: reached without the DT's lease."""
        with self._lock:
            if not self._depth:
                return False
            held = self._pending_frontiers.get(frontier.name)
            if held is None or held.updated_at is None or frontier.newer_than(held):
                self._pending_frontiers[frontier.name] = frontier
                if claim is None:
                    self._claims.pop(frontier.name, None)
                else:
                    self._claims[frontier.name] = claim
            return True

    def defer_compaction(self, table: str) -> bool:
        """Compact ``table`` at the batch's end; False outside a batch (compact it now)."""
        with self._lock:
            if self._depth:
                self._due_compactions.add(table)
                return True
            self._due_compactions.discard(table)
        return False

    def drop_frontier(self, name: str) -> None:
        with self._lock:
            self._pending_frontiers.pop(name, None)
            self._claims.pop(name, None)

    def claims(self, reached: Dict[str, Frontier]) -> List[Claim]:
        """The claims of the frontiers in ``reached`` (what :meth:`closing` gave)."""
        with self._lock:
            return [c for name, c in self._claims.items() if name in reached]

    def withdraw(self, claims: List[Claim], reached: Dict[str, Frontier]) -> None:
        """The frontiers of ``claims`` are not written: another refresh moved their DTs."""
        with self._lock:
            for claim in claims:
                if self._claims.get(claim.name) is claim:
                    del self._claims[claim.name]
                    if self._pending_frontiers.get(claim.name) is reached.get(claim.name):
                        del self._pending_frontiers[claim.name]
                reached.pop(claim.name, None)

    def unwritten_frontiers(self, name: Optional[str]) -> Dict[str, Frontier]:
        """The frontiers reached and not written yet (or ``name``'s)."""
        with self._lock:
            return {key: f for key, f in self._pending_frontiers.items() if name is None or key == name}

    def unwritten_history(self, name: Optional[str], since: Optional[datetime]) -> List[Record]:
        """The history rows recorded and not written yet (or ``name``'s; those started at or
        after ``since``), those being written included."""
        with self._lock:
            return [
                r
                for r in self._flushing_history + self._pending_history
                if (name is None or r["name"] == name) and (since is None or r["refresh_start_time"] >= since)
            ]

    def closing(self) -> Tuple[List[Record], Dict[str, Frontier]]:
        """Close one batch: the history rows and frontiers to write now, which stay readable from
        here until :meth:`written` says they are."""
        with self._lock:
            self._depth -= 1
            history, self._pending_history = self._pending_history, []
            self._flushing_history.extend(history)
            # Read from memory until written: a refresh in an overlapping batch that read the
            # previous frontier would take its DT's last refresh for a crashed one, and a
            # consistent read (snapshot.py) would miss the versions its DTs hold.
            return history, dict(self._pending_frontiers)

    def written(self, history: List[Record], reached: Dict[str, Frontier]) -> Set[str]:
        """What :meth:`closing` gave is written: forget it (a frontier reached again meanwhile
        stays), release the writer mark when nothing is left, and take the compactions due."""
        with self._lock:
            written = {id(record) for record in history}
            self._flushing_history = [r for r in self._flushing_history if id(r) not in written]
            for name, frontier in reached.items():
                if self._pending_frontiers.get(name) is frontier:
                    del self._pending_frontiers[name]
                    self._claims.pop(name, None)
            due, self._due_compactions = self._due_compactions, set()
            if not self._depth and not self._pending_frontiers:
                self._mark.release()  # what it stood for is written
        return due

    def writer(self) -> Optional[str]:
        """The mark an intent records for the frontier it reaches to be written at the end of
        this batch (docs/ARCHITECTURE.md, "Exactly once"); None outside a batch: at once."""
        with self._lock:
            return self._mark.hold() if self._depth else None

    def writer_alive(self, mark: str) -> bool:
        """Whether the process that recorded ``mark`` in an intent still has its batch open, so
        that it will write the frontier the intent reaches; not this store's own mark."""
        with self._lock:
            if mark == self._mark.held:
                return False
        return writer_alive(self.locks, mark)
