"""Applying a refresh to the DT: one Delta commit, after the production validations.

A delta arrives in Z-set form: the DT's columns plus ``_dyn_weight`` (+n inserts n copies of the
row, -n deletes n copies), one row per distinct tuple. The DT itself holds plain rows with no
hidden columns, so ``SELECT * FROM dt`` is the query's result as a multiset. A MERGE cannot delete
"k of n identical rows", so for every tuple the delta touches the merge deletes all its copies and
inserts back ``old + weight`` of them; ``old`` is read from the DT for the touched tuples only.
An insert-only delta, the common case for appends through filters and joins, is a plain INSERT
that never reads the DT.

Before the MERGE (seed 000 §6.1): the delta must be consolidated (no tuple twice) and must never
delete more copies of a tuple than the DT holds. A violation fails the refresh and leaves the DT
untouched.
"""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, List, Tuple

import pyarrow as pa
import pyarrow.compute as pc

from dbt.adapters.dyntable.engines.warehouse import quote, sql_string

if TYPE_CHECKING:
    from dbt.adapters.dyntable.dynamic_table.refresh import DynamicTable
    from dbt.adapters.dyntable.engines.base import Engine

WEIGHT = "_dyn_weight"
OLD = "_dyn_old"
KIND = "_dyn_kind"


class DeltaValidationError(RuntimeError):
    """A delta failed a production validation; the DT was not touched."""

    action = "INCREMENTAL"
    reason = "delta validation failed"


@dataclass
class PreparedDelta:
    columns: List[str]
    rows: pa.Table  # columns + weight + old multiplicity in the DT (0 when not read)

    @property
    def is_empty(self) -> bool:
        return self.rows.num_rows == 0

    @property
    def inserted(self) -> int:
        weights = self.rows.column(WEIGHT)
        return int(pc.sum(pc.if_else(pc.greater(weights, 0), weights, 0)).as_py() or 0)

    @property
    def deleted(self) -> int:
        weights = self.rows.column(WEIGHT)
        return int(-(pc.sum(pc.if_else(pc.less(weights, 0), weights, 0)).as_py() or 0))


def _null_safe_match(left: str, right: str, columns: List[str]) -> str:
    return " AND ".join(f"{left}.{quote(c)} <=> {right}.{quote(c)}" for c in columns) or "TRUE"


class DeltaApplier:
    def __init__(self, engine: "Engine", dt: "DynamicTable") -> None:
        self.engine = engine
        self.dt = dt

    # -- FULL / REINITIALIZE ---------------------------------------------------------------------

    def create_empty(self, query: str) -> None:
        """Create the DT empty, with the query's columns nullable (as Spark's CTAS keeps them)."""
        fields = self.engine.spark.sql(query).schema.fields
        columns = ", ".join(f"{quote(f.name)} {f.dataType.simpleString()}" for f in fields)
        partitioned = (
            f" PARTITIONED BY ({', '.join(quote(c) for c in self.dt.config.partition_by)})"
            if self.dt.config.partition_by else ""
        )
        self.engine.execute(
            f"CREATE TABLE {self.dt.relation} ({columns}) USING delta{partitioned}"
        )

    def overwrite(self, query: str) -> Tuple[int, int]:
        """Replace the DT's rows with the query's in one commit; returns (inserted, deleted)."""
        spark = self.engine.spark
        wanted = [(f.name.lower(), f.dataType) for f in spark.sql(query).schema.fields]
        current = [(f.name.lower(), f.dataType) for f in spark.table(self.dt.relation).schema.fields]
        before = self._count()
        if wanted == current:
            self.engine.execute(f"INSERT OVERWRITE {self.dt.relation} SELECT * FROM ({query}) AS q")
        else:
            location = self.engine.table_location(self.dt.schema, self.dt.identifier)
            partitioned = (
                f" PARTITIONED BY ({', '.join(quote(c) for c in self.dt.config.partition_by)})"
                if self.dt.config.partition_by else ""
            )
            self.engine.execute(
                f"CREATE OR REPLACE TABLE {self.dt.relation} USING delta{partitioned} "
                f"LOCATION {sql_string(str(location))} AS {query}"
            )
        return self._count(), before

    def _count(self) -> int:
        return int(self.engine.execute(f"SELECT count(*) AS n FROM {self.dt.relation}").collect()[0]["n"])

    # -- INCREMENTAL -----------------------------------------------------------------------------

    def prepare(self, delta_sql: str, columns: List[str]) -> PreparedDelta:
        """Run the delta query once and validate it. Only a delta that deletes reads the DT:
        an insert-only delta (appends through filters and joins) is applied without a scan."""
        rows = self.engine.execute(
            f"SELECT {', '.join(quote(c) for c in columns)}, {quote(WEIGHT)} FROM ({delta_sql}) AS q"
        ).toArrow()
        if rows.num_rows == 0:
            return PreparedDelta(columns, rows.append_column(OLD, pa.array([], pa.int64())))
        if pc.any(pc.equal(rows.column(WEIGHT), 0)).as_py():
            raise DeltaValidationError(
                f"Refresh of {self.dt.name} stopped before touching it: the delta has rows of weight 0."
            )
        with self._local_view(rows) as view:
            self._check_consolidated(view, columns)
            if pc.min(rows.column(WEIGHT)).as_py() > 0:
                return PreparedDelta(columns, rows.append_column(OLD, pa.array([0] * rows.num_rows, pa.int64())))
            with_old = self.engine.execute(
                f"""
                WITH old AS (
                    SELECT {", ".join(f"t.{quote(c)} AS {quote(c)}" for c in columns)}, count(*) AS {OLD}
                    FROM {self.dt.relation} AS t
                    JOIN (SELECT DISTINCT {", ".join(quote(c) for c in columns)} FROM {view}) AS k
                      ON {_null_safe_match("t", "k", columns)}
                    GROUP BY {", ".join(f"t.{quote(c)}" for c in columns)}
                )
                SELECT {", ".join(f"d.{quote(c)}" for c in columns)}, d.{WEIGHT} AS {WEIGHT},
                       coalesce(o.{OLD}, 0) AS {OLD}
                FROM {view} AS d LEFT JOIN old AS o ON {_null_safe_match("d", "o", columns)}
                """
            ).toArrow()
        if pc.min(pc.add(with_old.column(OLD), with_old.column(WEIGHT))).as_py() < 0:
            raise DeltaValidationError(
                f"Refresh of {self.dt.name} stopped before touching it: the delta deletes rows the "
                "table does not hold (it was changed outside dbt-dyntable, or a delta was lost). "
                "Run `dbt run --full-refresh -s <model>` to rebuild it."
            )
        return PreparedDelta(columns, with_old)

    def _check_consolidated(self, view: str, columns: List[str]) -> None:
        cols = ", ".join(quote(c) for c in columns)
        repeated = self.engine.execute(
            f"SELECT count(*) AS n FROM (SELECT {cols} FROM {view} GROUP BY {cols} HAVING count(*) > 1) AS r"
        ).collect()[0]["n"]
        if repeated:
            raise DeltaValidationError(
                f"Refresh of {self.dt.name} stopped before touching it: the delta holds {repeated} "
                "row(s) more than once (it was not consolidated). This is a bug in dbt-dyntable's "
                "differentiation; refresh_mode='full' works around it."
            )

    @contextmanager
    def _local_view(self, rows: pa.Table) -> Iterator[str]:
        """A temporary view over rows held here (Arrow), dropped afterwards."""
        view = f"dyntable_delta_{uuid.uuid4().hex[:12]}"
        self.engine.spark.createDataFrame(rows).createOrReplaceTempView(view)
        try:
            yield view
        finally:
            self.engine.spark.catalog.dropTempView(view)

    def apply(self, delta: PreparedDelta) -> Tuple[int, int]:
        """One commit. Insert-only: an INSERT of weight copies. Otherwise one MERGE that deletes
        every copy of each touched tuple and inserts back old + weight copies."""
        rows, columns = delta.rows, delta.columns
        repeat = pc.add(rows.column(OLD), rows.column(WEIGHT)).to_pylist()
        indices = pa.array([i for i, n in enumerate(repeat) for _ in range(max(n, 0))], pa.int64())
        inserts = rows.take(indices).select(columns)
        names = ", ".join(quote(c) for c in columns)
        if pc.max(rows.column(OLD)).as_py() == 0 and pc.min(rows.column(WEIGHT)).as_py() > 0:
            with self._local_view(inserts) as view:
                self.engine.execute(f"INSERT INTO {self.dt.relation} ({names}) SELECT {names} FROM {view}")
            return delta.inserted, delta.deleted
        deletes = rows.filter(pc.greater(rows.column(OLD), 0)).select(columns)
        source = pa.concat_tables([
            deletes.append_column(KIND, pa.array(["D"] * deletes.num_rows, pa.string())),
            inserts.append_column(KIND, pa.array(["I"] * inserts.num_rows, pa.string())),
        ])
        with self._local_view(source) as view:
            self.engine.execute(
                f"MERGE INTO {self.dt.relation} AS t USING {view} AS s "
                f"ON {_null_safe_match('t', 's', columns)} AND s.{KIND} = 'D' "
                "WHEN MATCHED THEN DELETE "
                f"WHEN NOT MATCHED AND s.{KIND} = 'I' THEN INSERT ({names}) "
                f"VALUES ({', '.join(f's.{quote(c)}' for c in columns)})"
            )
        return delta.inserted, delta.deleted
