"""Unique keys a dbt project declares on the relations a dynamic table reads, and on itself.

The planner proves keys where the query gives them (group keys, distinct rows); elsewhere a row
key can only come from what the project declares (docs/ARCHITECTURE.md, "Planning and row keys"):

- a generic ``unique`` test on a column, or ``dbt_utils.unique_combination_of_columns``;
- a ``primary_key`` or ``unique`` constraint, on a column or on the model.

Tests with a ``where`` config (only a subset is unique) and tests at severity ``warn`` (duplicates
are tolerated) declare nothing. A declaration is a promise the data may break: the refresh checks
it before matching rows on it (``apply.py``).

Both the materialization (dbt's ``graph`` context variable) and the runner
(``manifest.flat_graph``) hand over the same flat graph: ``{"nodes": {...}, "sources": {...}}``
of plain dicts.

>>> graph = {
...     "nodes": {
...         "model.p.m": {"resource_type": "model", "schema": "s", "alias": "m",
...                       "depends_on": {"nodes": ["source.p.raw.t"]}, "columns": {}},
...         "test.p.unique_t_id": {"resource_type": "test", "column_name": "id",
...                                "test_metadata": {"name": "unique", "kwargs": {}},
...                                "config": {"severity": "ERROR"},
...                                "depends_on": {"nodes": ["source.p.raw.t"]}},
...     },
...     "sources": {"source.p.raw.t": {"resource_type": "source", "schema": "raw",
...                                     "identifier": "t", "columns": {}}},
... }
>>> declared_keys(graph, "model.p.m")
{'raw.t': [['id']]}
"""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional

from dbt.adapters.dyntable import vocabulary

KeysByRelation = Dict[str, List[List[str]]]

_IDENTIFIER = re.compile(r"^[`\"]?([A-Za-z_][A-Za-z0-9_]*)[`\"]?$")


def declared_keys(graph: Mapping[str, Any], model_id: str) -> KeysByRelation:
    """``{relation: [key, ...]}`` for the model and every relation it reads, directly or through
    other models (views and ephemerals are inlined into the query, so the tables beneath them
    matter too). Relations are lower-case ``schema.identifier``; keys are lists of column names."""
    nodes: Mapping[str, Any] = graph.get("nodes") or {}
    sources: Mapping[str, Any] = graph.get("sources") or {}
    wanted: Dict[str, str] = {}  # unique_id -> relation name
    pending = [model_id]
    while pending:
        uid = pending.pop()
        if uid in wanted:
            continue
        node = nodes.get(uid) or sources.get(uid)
        if node is None:
            continue
        wanted[uid] = node_relation_name(node)
        pending.extend((node.get("depends_on") or {}).get("nodes") or [])
    keys: KeysByRelation = {}
    for uid, relation in wanted.items():
        for key in _constraint_keys(nodes.get(uid) or sources.get(uid) or {}):
            _add(keys, relation, key)
    for test in nodes.values():
        if test.get("resource_type") != "test":
            continue
        tested = (test.get("depends_on") or {}).get("nodes") or []
        if len(tested) != 1 or tested[0] not in wanted:
            continue
        tested_key = _test_key(test)
        if tested_key is not None:
            _add(keys, wanted[tested[0]], tested_key)
    return keys


def node_field(node: Any) -> Callable[[str], Any]:
    """Reads a field of a dbt node given as a flat-graph dict or a manifest node object."""
    if isinstance(node, Mapping):
        return node.get
    return lambda name: getattr(node, name, None)


def node_relation_name(node: Any) -> str:
    """The canonical name (``vocabulary.relation_name``) of the table a node builds, from a
    flat-graph dict or a manifest node object: the one way a node's table is named."""
    field = node_field(node)
    return vocabulary.relation_name(field("schema"), field("alias") or field("identifier") or field("name"))


def _add(keys: KeysByRelation, relation: str, key: List[str]) -> None:
    candidates = keys.setdefault(relation, [])
    if key not in candidates:
        candidates.append(key)


def _column(name: Any) -> Optional[str]:
    """A plain column name (quotes dropped), or None for an expression such as ``lower(email)``."""
    match = _IDENTIFIER.match(str(name or "").strip())
    return match.group(1).lower() if match else None


def _columns(names: Iterable[Any]) -> Optional[List[str]]:
    columns = [_column(n) for n in names]
    return columns if columns and all(columns) else None  # type: ignore[return-value]


def _test_key(test: Mapping[str, Any]) -> Optional[List[str]]:
    config = test.get("config") or {}
    if config.get("where") or str(config.get("severity") or "error").lower() != "error":
        return None
    metadata = test.get("test_metadata") or {}
    kwargs = metadata.get("kwargs") or {}
    name = metadata.get("name")
    if name == "unique":
        return _columns([test.get("column_name") or kwargs.get("column_name")])
    if name == "unique_combination_of_columns":
        return _columns(kwargs.get("combination_of_columns") or [])
    return None


def _constraint_keys(node: Mapping[str, Any]) -> Iterable[List[str]]:
    for constraint in node.get("constraints") or []:
        if constraint.get("type") in ("primary_key", "unique"):
            key = _columns(constraint.get("columns") or [])
            if key is not None:
                yield key
    for name, column in (node.get("columns") or {}).items():
        for constraint in column.get("constraints") or []:
            if constraint.get("type") in ("primary_key", "unique"):
                key = _columns([column.get("name") or name])
                if key is not None:
                    yield key
