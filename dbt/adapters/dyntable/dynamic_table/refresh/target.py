"""The DT as a refresh writes it: its Delta log, opened once per refresh (its snapshots cached),
and its columns as the statements that write it spell and type them.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from pyspark.sql.types import StructType

from dbt.adapters.dyntable.delta_log import DeltaLog
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.engines.base import Engine
from dbt.adapters.dyntable.vocabulary import quote


class Target:
    """The DT one refresh writes, on its engine."""

    def __init__(self, engine: Engine, dt: DynamicTable, dt_log: Optional[DeltaLog] = None) -> None:
        """``dt_log``: the DT's log where the caller has it open already."""
        self.engine = engine
        self.dt = dt
        self._dt_log = dt_log

    def log(self) -> Optional[DeltaLog]:
        """The DT's Delta log, one instance for this refresh (its snapshots cached); None until
        the DT exists."""
        if self._dt_log is None:
            self._dt_log = self.engine.delta_log(self.dt.name)
        return self._dt_log

    def partitioning(self) -> List[str]:
        log = self.log()
        return list(log.partition_columns) if log is not None else []

    def schema(self) -> StructType:
        """The DT's columns, from its Delta log (no engine call)."""
        log = self.log()
        if log is None:
            return self.engine.schema_of(f"SELECT * FROM {self.dt.relation}")
        return log.schema_at(log.latest_version())

    def keeps_layout(self, query: str) -> bool:
        """Whether the DT holds ``query``'s columns, types and the model's partitioning already."""
        wanted = [(f.name.lower(), f.dataType) for f in self.engine.schema_of(query).fields]
        current = [(f.name.lower(), f.dataType) for f in self.schema().fields]
        return wanted == current and self.partitioning() == list(self.dt.config.partition_by)

    def types(self) -> Dict[str, str]:
        """The DT's column types in SQL, by lower-case column name."""
        return {f.name.lower(): f.dataType.simpleString() for f in self.schema().fields}

    def spelled(self, columns: Sequence[str]) -> List[str]:
        """``columns`` as the DT spells them: deltalake matches names exactly, Spark either way."""
        named = {f.name.lower(): f.name for f in self.schema().fields}
        return [named.get(c.lower(), c) for c in columns]

    def typed(self, columns: Sequence[str]) -> str:
        """``columns`` cast to the DT's types: a rule's arithmetic (a folded sum, a widened union)
        may produce a wider type than the query's, which the MERGE would refuse."""
        types = self.types()
        return ", ".join(
            f"CAST({quote(c)} AS {types[c.lower()]}) AS {quote(c)}" if c.lower() in types else quote(c)
            for c in columns
        )

    def row_count(self) -> int:
        """The DT's rows: from its log's statistics where every file has them (no scan, and a
        rebuild of a table whose data files are damaged does not need to read them)."""
        log = self.log()
        counted = log.row_count(log.latest_version()) if log is not None else None
        return counted if counted is not None else self.rows_of(self.dt.relation)

    def rows_of(self, relation: str) -> int:
        """How many rows ``relation`` (a table, or a query in parentheses) holds: one engine job."""
        return int(self.engine.execute(f"SELECT count(*) AS n FROM {relation} AS r").collect()[0]["n"])
