"""Rendering a plan node as a plain SELECT over its sources at one version (``Q|I0`` or ``Q|I1``).

Derivatives need each input as it was before and after the interval; this is the undifferentiated
query with every scan reading the resolver's relation for that version.
"""

from __future__ import annotations

from typing import Callable, List, Mapping, Optional, Sequence

from dbt.adapters.dyntable.differentiation.plan import (
    Aggregate,
    Distinct,
    Filter,
    Join,
    Node,
    OneRow,
    Project,
    Scan,
    SemiJoin,
    UnionAll,
    Window,
)
from dbt.adapters.dyntable.differentiation.sqltext import cols, expr
from dbt.adapters.dyntable.vocabulary import quote as q

JOIN_SQL = {"inner": "JOIN", "left": "LEFT JOIN", "right": "RIGHT JOIN", "full": "FULL OUTER JOIN"}


def scan_select(node: Scan, relation: str, extra: str = "") -> str:
    listed = ", ".join(
        f"{q(source) if source is not None else '1'} AS {q(out)}"
        for source, out in zip(node.source_columns, node.output_columns)
    )
    return f"SELECT {listed}{extra} FROM {relation} AS `_dyn_t`"


def render(node: Node, relation: Callable[[str], str], sub: Callable[[Node], str]) -> str:
    """``node`` as a SELECT of ``node.columns``, reading base table ``t`` as ``relation(t)`` and
    each child as the query ``sub(child)``."""

    if isinstance(node, Scan):
        return scan_select(node, relation(node.table))
    if isinstance(node, OneRow):
        return f"SELECT 1 AS {q(node.name)}"
    if isinstance(node, Project):
        listed = ", ".join(f"{expr(e)} AS {q(n)}" for e, n in zip(node.expressions, node.names))
        return f"SELECT {listed} FROM ({sub(node.child)}) AS `_dyn_q`"
    if isinstance(node, Filter):
        return (
            f"SELECT {cols(node.columns)} FROM ({sub(node.child)}) AS `_dyn_q` WHERE {expr(node.condition)}"
        )
    if isinstance(node, Join):
        return join_select(node, sub(node.left), sub(node.right), node.kind)
    if isinstance(node, SemiJoin):
        kind = "LEFT ANTI JOIN" if node.anti else "LEFT SEMI JOIN"
        return (
            f"SELECT {cols(node.columns)} FROM ({sub(node.left)}) AS `_dyn_l` {kind} "
            f"({sub(node.right)}) AS `_dyn_r` ON {expr(node.condition)}"
        )
    if isinstance(node, UnionAll):
        return "\nUNION ALL\n".join(
            f"SELECT {rename(child.columns, node.names)} FROM ({sub(child)}) AS `_dyn_u{i}`"
            for i, child in enumerate(node.inputs)
        )
    if isinstance(node, Aggregate):
        return aggregate_select(node, sub(node.child))
    if isinstance(node, Distinct):
        return f"SELECT DISTINCT {cols(node.columns)} FROM ({sub(node.child)}) AS `_dyn_q`"
    if isinstance(node, Window):
        return window_select(node, sub(node.child))
    raise TypeError(f"no renderer for {type(node).__name__}")


def rename(old: List[str], new: List[str], types: Optional[Mapping[str, str]] = None) -> str:
    """The ``old`` columns named ``new``, each cast to the type ``types`` gives its new name
    (lower-case) where it gives one."""
    types = types or {}
    return ", ".join(
        f"CAST({q(o)} AS {types[n.lower()]}) AS {q(n)}" if n.lower() in types else f"{q(o)} AS {q(n)}"
        for o, n in zip(old, new)
    )


def join_select(node: Join, left: str, right: str, kind: str, weight: str = "") -> str:
    condition = expr(node.condition) if node.condition is not None else "TRUE"
    return (
        f"SELECT {cols(node.columns)}{weight} FROM ({left}) AS `_dyn_l` {JOIN_SQL[kind]} "
        f"({right}) AS `_dyn_r` ON {condition}"
    )


def aggregate_select(node: Aggregate, child: str) -> str:
    listed = ", ".join(f"{expr(e)} AS {q(n)}" for n, e in node.keys + node.aggregates)
    group = ""
    if node.keys:
        group = " GROUP BY " + ", ".join(expr(e) for _, e in node.keys)
    return f"SELECT {listed} FROM ({child}) AS `_dyn_q`{group}"


def window_select(node: Window, child: str, columns: Optional[Sequence[str]] = None) -> str:
    """``node``'s window over ``child``, passing on ``columns`` of it (all of node's input's)."""
    functions = ", ".join(f"{expr(f)} AS {q(n)}" for n, f in node.functions)
    passed = node.child.columns if columns is None else columns
    return f"SELECT {cols(passed)}, {functions} FROM ({child}) AS `_dyn_q`"
