"""Who writes a refresh's rows into the DT (docs/ARCHITECTURE.md, "Applying"): the engine, by
SQL, or this process, by deltalake, behind one :class:`Writer` protocol; the choice is made here
alone (:func:`writes_in_process`), for rows and for compactions alike.

Where the engine allows it (the embedded one), rows this process holds are merged or appended by
deltalake rather than handed back to the engine. The intent a refresh records in the DT's commit
(docs/ARCHITECTURE.md, "Exactly once") is an argument of each write: a writer says whether its
commits carry it (``carries_intent``) before the refresh writes, which then records the intent
in the frontier table where they cannot.
"""

from __future__ import annotations

from typing import Optional, Protocol, Tuple

from pyspark.sql.types import ArrayType, MapType, StructType

from dbt.adapters.dyntable.delta_log import DELETION_VECTOR_FEATURES, DELETION_VECTORS, Snapshot
from dbt.adapters.dyntable.dynamic_table.refresh.apply import Folding, PreparedDelta
from dbt.adapters.dyntable.dynamic_table.refresh.deltalake_writer import DeltaLakeWriter
from dbt.adapters.dyntable.dynamic_table.refresh.engine_writer import EngineWriter
from dbt.adapters.dyntable.dynamic_table.refresh.target import Target

#: A DT at least this large, with deletion vectors, has the engine delete its rows (marking them
#: in deletion vectors) rather than deltalake rewrite the files holding them: its readers then
#: read the rows a refresh changed, not those files (docs/ARCHITECTURE.md, "Rewritten inputs").
MASKED_BYTES = 32 << 20


class Writer(Protocol):
    """Writes rows into the DT in one commit, returning the rows inserted and deleted; a commit
    records ``user_metadata`` as its ``commitInfo.userMetadata`` where ``carries_intent``."""

    @property
    def carries_intent(self) -> bool: ...

    def apply(self, delta: PreparedDelta, user_metadata: Optional[str]) -> Tuple[int, int]:
        """One commit. Insert-only: an INSERT of weight copies. Otherwise one MERGE that deletes
        every copy of each touched tuple and inserts back old + weight copies; with a row key, it
        deletes the row stored under each key the delta deletes and inserts the delta's inserts."""
        ...

    def accumulate(self, fold: Folding, user_metadata: Optional[str]) -> Tuple[int, int]:
        """Fold an insert-only delta's partials (``apply.folding``) into the DT's stored groups by
        one MERGE on the group keys: a stored group's values become the folded ones (an update),
        a new group is inserted (docs/ARCHITECTURE.md, "Applying"). The partials, one row per
        group, never read the DT. Rows are counted as a MERGE's commit counts them, an update
        being one of each."""
        ...


def writer_for(target: Target, delta: Optional[PreparedDelta] = None) -> Writer:
    """The writer of ``delta`` into ``target`` (of an accumulation, when None)."""
    return DeltaLakeWriter(target) if writes_in_process(target, delta) else EngineWriter(target)


def writes_in_process(target: Target, delta: Optional[PreparedDelta] = None) -> bool:
    """Whether this process writes into the DT with deltalake (``delta``'s rows, an
    accumulation's or a compaction's when None): the engine allows it
    (``Capabilities.merge_in_process``) and the DT uses nothing deltalake's writer might not
    keep, unless the engine masks the rows ``delta`` deletes in deletion vectors."""
    log = target.log()
    if log is None or not target.engine.capabilities.merge_in_process:
        return False
    snapshot = log.snapshot(log.latest_version())
    if not writable_in_process(snapshot):
        return False
    return delta is None or not _masked_by_engine(target, snapshot, delta)


def writable_in_process(snapshot: Snapshot) -> bool:
    """The DT uses nothing deltalake's writer might not keep (table features, whether listed or
    implied by a writer version 3-6: CHECK constraints, a change data feed, generated or identity
    columns, column mapping; deletion vectors it keeps: it writes none, but reads through the
    ones a table holds and rewrites their files whole) and only atomic columns (DataFusion
    compares nested values otherwise than Spark's ``<=>``), so this process may write it
    (``Capabilities.merge_in_process``)."""
    return (
        set(snapshot.writer_features) <= DELETION_VECTOR_FEATURES
        and snapshot.min_writer_version in (1, 2, 7)
        and snapshot.column_mapping_mode == "none"
        and not any(k.startswith("delta.constraints.") for k in snapshot.configuration)
        and not any(isinstance(f.dataType, (ArrayType, MapType, StructType)) for f in snapshot.schema.fields)
    )


def _masked_by_engine(target: Target, snapshot: Snapshot, delta: PreparedDelta) -> bool:
    """Whether the engine deletes the rows ``delta`` deletes, in deletion vectors: the DT has
    them and is large (:data:`MASKED_BYTES`)."""
    if delta.deletes().num_rows == 0 or not target.engine.capabilities.deletion_vectors:
        return False
    return (snapshot.configuration.get(DELETION_VECTORS) or "").lower() == "true" and sum(
        f.size_bytes for f in snapshot.files.values()
    ) >= MASKED_BYTES
