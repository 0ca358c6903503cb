"""A dynamic table as the refresh sees it: the model's relation, compiled SELECT and config.

The materialization (from dbt's model node) and the runner (from the manifest's nodes) build it
with :meth:`DynamicTable.from_node`, the one place a node becomes a dynamic table.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, Iterable, Mapping, Optional

from dbt.adapters.dyntable.dynamic_table.config import DynamicTableConfig, DynamicTableConfigError
from dbt.adapters.dyntable.dynamic_table.declared_keys import (
    KeysByRelation,
    declared_keys,
    node_field,
    node_relation_name,
)
from dbt.adapters.dyntable.vocabulary import quote, relation_name

#: What ``refresh_boundary(ref('x'))`` leaves beside the relation it renders in compiled SQL
#: (docs/ARCHITECTURE.md, "Refresh boundaries"). A comment survives dbt's compilation, needs no
#: config, and lets `dbt run` and the runner both see the boundary in the SQL they refresh.
#: What a dynamic table's schema and name may hold: Sail writes the log and the data files of a
#: table whose name needs escaping in a path to two different folders (docs/ARCHITECTURE.md,
#: "Engines"), and a project must run on either engine.
PLAIN_NAME = re.compile(r"^[A-Za-z0-9_]+$")
PLAIN_SUBSTITUTE = re.compile(r"[^A-Za-z0-9_]+")
REFRESH_BOUNDARY_MARKER = re.compile(r"/\*\s*dyntable:refresh_boundary=([^\s*]+)\s*\*/")
#: Model configs dbt and dbt-spark's macros read that their config classes do not declare.
MACRO_CONFIG_KEYS = frozenset(
    {
        "sql_header",
        "tblproperties",
        "merge_exclude_columns",
        "incremental_predicates",
        "post_hook",
        "pre_hook",
    }
)


@functools.lru_cache(maxsize=1)
def dbt_config_keys() -> FrozenSet[str]:
    """The model config keys dbt-core and dbt-spark know (a dynamic table warns of others)."""
    from dbt.adapters.spark.impl import SparkConfig
    from dbt.artifacts.resources.v1.model import ModelConfig

    names = {f.name for f in dataclasses.fields(ModelConfig) + dataclasses.fields(SparkConfig)}
    return frozenset(names | set(ModelConfig().to_dict()) | MACRO_CONFIG_KEYS)


class RefreshError(RuntimeError):
    """A refresh failed; the DT keeps its last good version. The message says what failed and the
    fix, without naming the DT: whoever shows it does, once (:meth:`DynamicTable.said`; the
    runner's tables and the history name it in a column of their own)."""


@dataclass(frozen=True)
class Docs:
    """The comments dbt's ``persist_docs`` asks for on the DT (docs/ARCHITECTURE.md, "Table
    features"): the table's (None: none asked), and each documented column's, by name."""

    table: Optional[str] = None
    columns: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of_node(cls, get: Any, config: Mapping[str, Any]) -> "Docs":
        """What ``persist_docs`` (``relation``, ``columns``) asks for on the node read by ``get``."""
        persist = config.get("persist_docs") or {}
        if not isinstance(persist, Mapping):
            return cls()
        table = (get("description") or None) if persist.get("relation") else None
        columns: Dict[str, str] = {}
        if persist.get("columns"):
            for name, column in (get("columns") or {}).items():
                description = node_field(column)("description")
                if description:
                    columns[name] = description
        return cls(table, columns)


def refresh_boundaries(sql: str) -> FrozenSet[str]:
    """Relations (``schema.table``) ``sql`` reads across a refresh boundary."""
    return frozenset(name.lower() for name in REFRESH_BOUNDARY_MARKER.findall(sql))


@dataclass(frozen=True)
class DynamicTable:
    schema: str
    identifier: str
    sql: str
    config: DynamicTableConfig
    #: The model's name in the dbt project (what error messages call it).
    model: str = ""
    #: Unique keys the dbt project declares on this table and the relations it reads
    #: (declared_keys.py): ``{schema.table: [key, ...]}``.
    declared_keys: KeysByRelation = field(default_factory=dict, compare=False)
    #: The comments ``persist_docs`` asks for (written when the DT is created).
    docs: Docs = field(default_factory=Docs, compare=False)

    @property
    def name(self) -> str:
        return relation_name(self.schema, self.identifier)

    @property
    def relation(self) -> str:
        return f"{quote(self.schema)}.{quote(self.identifier)}"

    @property
    def refresh_boundaries(self) -> FrozenSet[str]:
        return refresh_boundaries(self.sql)

    def said(self, words: object) -> str:
        """What dbt's output says of this DT (an error refreshing or explaining it, what `--empty`
        did): the DT and its model, once, then ``words``."""
        return f"Dynamic table {self.name} (model {self.model}): {words}"

    @classmethod
    def from_node(
        cls, node: Any, graph: Optional[Mapping[str, Any]] = None, sql: Optional[str] = None
    ) -> "DynamicTable":
        """The DT a dbt model node defines: a manifest node object or its dict form (Jinja's
        ``model``), with ``graph`` (dbt's flat graph) for the keys the project declares.
        Raises :class:`~dbt.adapters.dyntable.dynamic_table.config.DynamicTableConfigError`."""
        get = node_field(node)
        config = get("config")
        config = config if isinstance(config, Mapping) else config.to_dict()
        name = get("name")
        unique_id = get("unique_id")
        keys = declared_keys(graph, unique_id) if graph and unique_id else {}
        schema, identifier = get("schema"), get("alias") or name
        for what, value, key in (("schema", schema, "schema"), ("name", identifier, "alias")):
            if not PLAIN_NAME.match(value or ""):
                plain = PLAIN_SUBSTITUTE.sub("_", value or "").strip("_") or "dt"
                raise DynamicTableConfigError(
                    f"Model '{name}': the dynamic table's {what} {value!r} has characters other than "
                    "letters, digits and underscores, which the embedded engine cannot store "
                    f"(docs/ARCHITECTURE.md, \"Engines\"). Set {key}='{plain}' in its config."
                )
        return cls(
            schema=schema,
            identifier=identifier,
            sql=sql if sql is not None else get("compiled_code") or "",
            config=DynamicTableConfig.from_model(name, config, dbt_config_keys()),
            model=name,
            declared_keys=keys,
            docs=Docs.of_node(get, config),
        )


#: Materializations whose relation is a table dbt writes (views and ephemerals are read through
#: their definitions; dynamic tables are read at their own refreshes' versions).
BUILT_TABLES = frozenset({"table", "incremental", "seed", "snapshot"})


def built_tables(graph: Optional[Mapping[str, Any]], selected: Optional[Iterable[str]]) -> FrozenSet[str]:
    """The tables (canonical names) an invocation selecting ``selected`` builds: its seeds,
    snapshots, table and incremental models (docs/ARCHITECTURE.md, "Reading sources")."""
    nodes: Mapping[str, Any] = (graph or {}).get("nodes") or {}
    built = set()
    for unique_id in selected or ():
        node = nodes.get(unique_id)
        if node is None:
            continue
        get = node_field(node)
        config = get("config") or {}
        materialized = config.get("materialized") if isinstance(config, Mapping) else None
        if get("resource_type") in ("seed", "snapshot") or materialized in BUILT_TABLES:
            built.add(node_relation_name(node))
    return frozenset(built)
