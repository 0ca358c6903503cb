"""The in-process writer (``write.py``): rows this process holds written into the DT by
deltalake, where the engine allows it (``Capabilities.merge_in_process``), rather than handed
back to the engine (docs/ARCHITECTURE.md, "Applying"). Its commits carry the refresh's intent as
their ``userMetadata``.
"""

from __future__ import annotations

import functools
from typing import Dict, Optional, Sequence, Tuple

import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from deltalake import CommitProperties, DeltaTable, write_deltalake
from sqlglot import exp

from dbt.adapters.dyntable.delta_log import CHECKPOINT_INTERVAL, DEFAULT_CHECKPOINT_INTERVAL, DeltaLog
from dbt.adapters.dyntable.dynamic_table.refresh.apply import (
    KIND,
    PRESENT,
    Folding,
    PreparedDelta,
    changes,
    key_bounds,
)
from dbt.adapters.dyntable.dynamic_table.refresh.target import Target
from dbt.adapters.dyntable.vocabulary import DIALECT, quote

#: A DT whose files weigh less than this is written whole by an accumulation of inserts where
#: the engine refolds small tables (``Capabilities.refolds_small_tables``): deltalake's MERGE
#: rewrites the files holding the groups it touches, which for a table this small is every one.
REFOLDED_BYTES = 1 << 20


@functools.lru_cache(maxsize=1024)
def datafusion_sql(spark_sql: str) -> str:
    """A Spark SQL expression as deltalake's MERGE reads it (DataFusion: double-quoted names,
    ``IS NOT DISTINCT FROM``). Each conjunct is parenthesized: DataFusion binds ``AND`` tighter
    than ``IS NOT DISTINCT FROM``."""
    parsed = sqlglot.parse_one(spark_sql, read=DIALECT)
    if not isinstance(parsed, exp.And):
        return parsed.sql(dialect="postgres")
    return " AND ".join(f"({c.sql(dialect='postgres')})" for c in parsed.flatten())


class DeltaLakeWriter:
    """Writes the DT with deltalake, in this process."""

    carries_intent = True

    def __init__(self, target: Target) -> None:
        self.target = target
        log = target.log()
        assert log is not None, "only an existing DT is written in process"
        self.log = log

    def apply(self, delta: PreparedDelta, user_metadata: Optional[str]) -> Tuple[int, int]:
        """``Writer.apply``: an append, or a MERGE, of the rows this process holds."""
        written = changes(self.target, delta)
        table = self.log.for_writing()
        if written.deletes.num_rows == 0:
            schema = pa.schema(table.schema().to_arrow())
            rows_in = written.inserts.select(schema.names).cast(schema)
            write_deltalake(table, rows_in, mode="append", commit_properties=_carrying(user_metadata))
        else:
            _merge_rows(
                table,
                written.merge_source(),
                written.on,
                written.columns,
                delete=True,
                insert_when=f"s.{KIND} = 'I'",
                carried=_carrying(user_metadata),
            )
        written_here(table, self.log)
        return delta.inserted, delta.deleted

    def accumulate(self, fold: Folding, user_metadata: Optional[str]) -> Tuple[int, int]:
        """``Writer.accumulate``: deltalake's MERGE of the partials, or where the DT is small and
        the engine refolds small tables, the DT written whole (:meth:`_refold`)."""
        table = self.log.for_writing()
        if self._refolded_whole():
            return self._refold(table, fold, user_metadata)
        rows = self.target.engine.arrow(fold.source)
        if rows.num_rows == 0:
            return 0, 0
        on = " AND ".join([fold.on, *key_bounds(rows, fold.keys, "t")])
        metrics = _merge_rows(
            table, rows, on, fold.columns, update=fold.folded, carried=_carrying(user_metadata)
        )
        written_here(table, self.log)
        inserted, updated = metrics["num_target_rows_inserted"], metrics["num_target_rows_updated"]
        return inserted + updated, metrics["num_target_rows_deleted"] + updated

    def _refolded_whole(self) -> bool:
        """Whether an accumulation rewrites the DT whole (``Capabilities.refolds_small_tables``)."""
        if not self.target.engine.capabilities.refolds_small_tables:
            return False
        files = self.log.snapshot(self.log.latest_version()).files.values()
        return sum(f.size_bytes for f in files) < REFOLDED_BYTES

    def _refold(self, table: DeltaTable, fold: Folding, user_metadata: Optional[str]) -> Tuple[int, int]:
        """The DT with the partials of ``fold`` folded in, computed by one query that joins the
        stored groups to the touched ones, and written whole by this process in one commit: the
        groups the partials do not touch are written back as they were. Rows are counted as
        deltalake's MERGE counts them: an updated group is one row inserted and one deleted."""

        def value(column: str) -> str:
            stored, partial = f"t.{quote(column)}", f"s.{quote(column)}"
            matched = fold.folded.get(column, stored)
            return (
                f"CASE WHEN t.{PRESENT} IS NULL THEN {partial} WHEN s.{PRESENT} IS NULL THEN {stored} "
                f"ELSE {matched} END AS {quote(column)}"
            )

        kind = f"CASE WHEN t.{PRESENT} IS NULL THEN 'I' WHEN s.{PRESENT} IS NULL THEN 'K' ELSE 'U' END"
        joined = (
            f"SELECT {', '.join(value(c) for c in fold.columns)}, {kind} AS {KIND} "
            f"FROM (SELECT *, true AS {PRESENT} FROM {self.target.dt.relation}) AS t "
            f"FULL OUTER JOIN (SELECT *, true AS {PRESENT} FROM ({fold.source}) AS p) AS s ON {fold.on}"
        )
        rows = self.target.engine.arrow(
            f"SELECT {self.target.typed(fold.columns)}, {KIND} FROM ({joined}) AS f"
        )
        kinds = rows.column(KIND)
        inserted = int(pc.sum(pc.equal(kinds, "I")).as_py() or 0)
        updated = int(pc.sum(pc.equal(kinds, "U")).as_py() or 0)
        if inserted == updated == 0:
            return 0, 0
        schema = pa.schema(table.schema().to_arrow())
        write_deltalake(
            table,
            rows.select(schema.names).cast(schema),
            mode="overwrite",
            partition_by=self.target.partitioning() or None,
            commit_properties=_carrying(user_metadata),
        )
        written_here(table, self.log)
        return inserted + updated, updated


def written_here(table: DeltaTable, log: DeltaLog) -> None:
    """After ``table`` (``DeltaLog.for_writing``) committed: a checkpoint at the versions where
    the engine would have written one (the DT's ``delta.checkpointInterval``, else Delta's
    default; deltalake's own default is 100: without this, every reader of a DT written here
    replays up to 100 commits), and the DT's next snapshot read from it rather than the log."""
    configured = table.metadata().configuration.get(CHECKPOINT_INTERVAL)
    if table.version() % int(configured or DEFAULT_CHECKPOINT_INTERVAL) == 0:
        table.create_checkpoint()
    log.written(table)


def _carrying(user_metadata: Optional[str]) -> Optional[CommitProperties]:
    """What a commit this process writes on the DT records beyond its actions."""
    if user_metadata is None:
        return None
    return CommitProperties(custom_metadata={"userMetadata": user_metadata})


def _merge_rows(
    table: DeltaTable,
    rows: pa.Table,
    on: str,
    columns: Sequence[str],
    update: Optional[Dict[str, str]] = None,
    delete: bool = False,
    insert_when: Optional[str] = None,
    carried: Optional[CommitProperties] = None,
) -> Dict[str, int]:
    """One deltalake MERGE of ``rows`` (``s``) into ``table`` (``t``) in this process, returning
    its metrics: a matched row gets ``update`` (column: Spark SQL) or, with ``delete``, is
    deleted; an unmatched one (where ``insert_when`` holds) is inserted as ``columns``; its
    commit carries ``carried``. deltalake casts what it writes to the table's schema, as the
    engine's MERGE does with its CASTs."""
    merge = table.merge(
        rows, datafusion_sql(on), source_alias="s", target_alias="t", commit_properties=carried
    )
    if update:
        merge = merge.when_matched_update(
            {datafusion_sql(quote(c)): datafusion_sql(v) for c, v in update.items()}
        )
    if delete:
        merge = merge.when_matched_delete()
    inserted = {datafusion_sql(quote(c)): datafusion_sql(f"s.{quote(c)}") for c in columns}
    merge = merge.when_not_matched_insert(inserted, datafusion_sql(insert_when) if insert_when else None)
    return {name: int(value) for name, value in merge.execute().items()}
