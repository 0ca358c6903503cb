"""DDL the embedded engine runs as Spark with Delta would, where Sail runs it differently:

* a ``CREATE TABLE`` without ``LOCATION`` gets one under the warehouse, and is Delta without
  ``USING``; another format is refused, as the warehouse re-attaches Delta tables only;
* a CTAS creating a new table first creates it empty with the query's schema made nullable,
  because Sail's CTAS marks columns NOT NULL where Spark keeps them nullable;
* a ``CREATE OR REPLACE ... AS`` changing an existing table's columns or partitioning replaces its
  schema, as Delta's does, where Sail's would keep the old columns and cast the rows to them;
* ``DROP TABLE`` / ``DROP SCHEMA`` delete the files Sail would leave behind;
* a schema or a view created or dropped is saved in, or deleted from, the warehouse, which
  re-attaches it when an engine starts (see :mod:`.warehouse`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Set

from sqlglot import exp

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.delta_log import DeltaLog
from dbt.adapters.dyntable.engines.base import EngineGap
from dbt.adapters.dyntable.engines.embedded_set_operations import checked_schema
from dbt.adapters.dyntable.engines.warehouse import PersistedTable, Warehouse
from dbt.adapters.dyntable.vocabulary import DIALECT, quote

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def has_delta_log(location: str) -> bool:
    """Whether a Delta log is at ``location`` (a local folder, or one with a commit in an
    object store, where there are no folders)."""
    if not storage.is_url(location):
        return os.path.isdir(f"{location}/_delta_log")
    return storage.is_delta_table(location)


def _refuse_other_formats(create: exp.Create, table: exp.Table) -> None:
    """The warehouse re-attaches Delta tables only: another format would be gone in the next
    process."""
    stored = create.find(exp.FileFormatProperty)
    if stored is not None and stored.name.lower() != "delta":
        raise EngineGap(
            f"Table {table.sql(dialect=DIALECT)} would be stored as {stored.name}: the embedded "
            "engine keeps Delta tables only (another format would be gone in the next process, "
            "and dynamic tables read Delta). Set `file_format: delta` for it (`+file_format: "
            "delta` for models, seeds and snapshots in dbt_project.yml), or remove `file_format`."
        )


class EmbeddedDdl:
    """One DDL statement of the embedded engine, run on ``spark`` as the module says, keeping
    ``warehouse`` and the engine's listed ``view_names`` in step; ``table_location`` is the
    engine's (:meth:`~dbt.adapters.dyntable.engines.base.Engine.table_location`)."""

    def __init__(
        self,
        spark: "SparkSession",
        warehouse: Warehouse,
        view_names: Dict[str, Set[str]],
        table_location: Callable[[str, str], Optional[str]],
    ) -> None:
        self.spark = spark
        self.warehouse = warehouse
        self.view_names = view_names
        self.table_location = table_location

    def _schema_of(self, table: exp.Table) -> str:
        return table.db or self.spark.catalog.currentDatabase()

    def create(self, statement: str, create: exp.Create) -> "DataFrame":
        kind = (create.args.get("kind") or "").upper()
        properties = create.args.get("properties")
        temporary = bool(properties and properties.find(exp.TemporaryProperty))
        if kind in ("SCHEMA", "DATABASE"):
            result = self.spark.sql(statement)
            self.warehouse.create_schema(create.this.db or create.this.name)
            return result
        if kind == "VIEW" and not temporary:
            result = self.spark.sql(statement)
            table = create.this if isinstance(create.this, exp.Table) else create.this.this
            self.warehouse.save_view(self._schema_of(table), table.name, statement)
            self.view_names.get(self._schema_of(table).lower(), set()).add(table.name.lower())
            return result
        if kind != "TABLE" or temporary:
            return self.spark.sql(statement)
        return self._create_table(statement, create)

    def _create_table(self, statement: str, create: exp.Create) -> "DataFrame":
        table = create.this if isinstance(create.this, exp.Table) else create.this.this
        _refuse_other_formats(create, table)
        schema = self._schema_of(table)
        located = create.find(exp.LocationProperty)
        location = located.this.name if located else self.warehouse.table_location(schema, table.name)
        if not located:
            create = create.copy()
            props = create.args.get("properties") or exp.Properties(expressions=[])
            props.append("expressions", exp.LocationProperty(this=exp.Literal.string(str(location))))
            create.set("properties", props)
            statement = create.sql(dialect=DIALECT)
        query = create.expression
        is_new = not has_delta_log(location)
        replace = query is not None and not is_new and bool(create.args.get("replace"))
        if replace and self._replaces_schema(create, location, query):
            return self._replace_schema(create, schema, table, location, query)
        if query is None or not is_new:
            return self._register_again(statement, schema, table.name, location)
        return self._create_and_fill(statement, create, schema, table, location, query)

    def _create_and_fill(
        self,
        statement: str,
        create: exp.Create,
        schema: str,
        table: exp.Table,
        location: str,
        query: exp.Expression,
    ) -> "DataFrame":
        """CTAS of a new table: create it empty with nullable columns, then fill it. If filling
        fails, remove it again so no half-created table is left."""
        fields = checked_schema(self.spark, query).fields
        if any(f.dataType.typeName() == "void" for f in fields):
            return self.spark.sql(statement)  # Delta rejects untyped NULL columns; let it say so
        shell = create.copy()
        shell.set("expression", None)
        shell.set("replace", False)
        shell.set(
            "this",
            exp.Schema(
                this=table.copy(),
                expressions=[
                    exp.ColumnDef(
                        this=exp.to_identifier(f.name, quoted=True),
                        kind=exp.DataType.build(f.dataType.simpleString(), dialect=DIALECT),
                    )
                    for f in fields
                ],
            ),
        )
        self.spark.sql(shell.sql(dialect=DIALECT))
        # INSERT, not CREATE OR REPLACE ... AS SELECT: the latter re-registers the table in the
        # session's catalog with the query's NOT NULL columns, and inserting a NULL then fails.
        # The query goes in a subquery: Sail rejects `WITH ... INSERT`, and the columns keep
        # their order for the positional insert.
        fill = (
            f"INSERT INTO {table.sql(dialect='spark')} "
            f"SELECT * FROM ({query.sql(dialect='spark')}) AS ctas_query"
        )
        try:
            return self.spark.sql(fill)
        except Exception:
            self._drop_quietly(schema, table.name, location)
            raise

    def _register_again(self, statement: str, schema: str, name: str, location: str) -> "DataFrame":
        """Run ``statement`` as written, then register its table as every persisted table is,
        reading its schema from the Delta log: Sail registers the columns the statement declares
        (or, for CTAS over an existing table, the query's NOT NULL ones), and a NULL inserted or a
        column another writer changes would fail. Sail's DROP TABLE leaves the files."""
        result = self.spark.sql(statement)
        if has_delta_log(location):
            self._register_from_log(schema, name, location)
        return result

    def _register_from_log(self, schema: str, name: str, location: str) -> "DataFrame":
        """Register the table afresh with the columns its Delta log holds (a catalog-only drop
        first: Sail's DROP TABLE leaves the files)."""
        self.spark.sql(f"DROP TABLE IF EXISTS {quote(schema)}.{quote(name)}")
        return self.spark.sql(PersistedTable(schema, name, location).create_statement())

    def _replaces_schema(self, create: exp.Create, location: str, query: exp.Expression) -> bool:
        """Whether ``CREATE OR REPLACE ... AS query`` changes the Delta table's columns (names,
        order, types) or partitioning: Sail's CTAS over an existing table keeps its schema, casting
        the query's rows to it, where Delta's replaces it (docs/ARCHITECTURE.md, "Engines")."""
        log = DeltaLog(str(location))
        current = [(f.name, f.dataType.simpleString()) for f in log.schema_at(log.latest_version()).fields]
        fields = checked_schema(self.spark, query).fields
        return [(f.name, f.dataType.simpleString()) for f in fields] != current or _partitioning(
            create
        ) != list(log.partition_columns)

    def _replace_schema(
        self, create: exp.Create, schema: str, table: exp.Table, location: str, query: exp.Expression
    ) -> "DataFrame":
        """``CREATE OR REPLACE ... AS query`` of an existing table whose schema or partitioning
        changes, as Delta does it: the query written over the table with ``overwriteSchema`` (one
        commit, its history kept), then the NOT NULL Sail's writer keeps from the query's plan
        dropped, as Spark's CTAS would not set it (metadata-only commits: no rows change). That
        writer moves partition columns last, so a partitioned table is re-created instead, in the
        query's column order: its history restarts, which every reader takes as a rebuild."""
        if _partitioning(create):
            self._drop_quietly(schema, table.name, location)
            return self._create_table(create.sql(dialect=DIALECT), create)
        rows = self.spark.sql(query.sql(dialect=DIALECT))
        rows.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(str(location))
        written = storage.delta_table(location)
        for field in written.schema().fields:
            if not field.nullable:
                written.alter.drop_column_not_null(field.name)
        # The session's catalog still lists the old columns.
        return self._register_from_log(schema, table.name, location)

    def _drop_quietly(self, schema: str, name: str, location: str) -> None:
        try:
            self.spark.sql(f"DROP TABLE IF EXISTS {quote(schema)}.{quote(name)}")
        finally:
            self.warehouse.drop_table(location)

    def drop(self, statement: str, drop: exp.Drop) -> "DataFrame":
        kind = (drop.args.get("kind") or "").upper()
        targets = drop.args.get("tables") or []
        if len(targets) != 1:
            return self.spark.sql(statement)
        target = targets[0]
        if kind in ("SCHEMA", "DATABASE"):
            result = self.spark.sql(statement)
            self.warehouse.drop_schema(target.db or target.name)
            return result
        schema = self._schema_of(target)
        if kind == "VIEW":
            result = self.spark.sql(statement)
            self.warehouse.drop_view(schema, target.name)
            self.view_names.get(schema.lower(), set()).discard(target.name.lower())
            return result
        if kind == "TABLE":
            location = self.table_location(schema, target.name)
            result = self.spark.sql(statement)
            if location is not None:
                self.warehouse.drop_table(location)
            return result
        return self.spark.sql(statement)


def _partitioning(create: exp.Create) -> List[str]:
    """The partition columns a CREATE TABLE statement declares."""
    declared = create.find(exp.PartitionedByProperty)
    if declared is None:
        return []
    columns = declared.this.expressions if isinstance(declared.this, exp.Schema) else [declared.this]
    return [column.name for column in columns]
