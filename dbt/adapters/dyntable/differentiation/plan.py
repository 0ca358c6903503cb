"""The small relational plan a query is lowered to: scan, project, filter, join, semi/anti join,
union all, aggregate, distinct, window.

Every column a node produces has a name unique in the whole plan (``c7_amount``), minted once by
the node that computes it and passed through unchanged by the nodes above. Expressions are sqlglot
trees over those names, so any node renders as ``SELECT ... FROM (<child>) AS q`` with no
qualification, and the two inputs of a join never share a column name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Iterator, List, Optional, Tuple

from sqlglot import exp

from dbt.adapters.dyntable.differentiation.sqltext import expr


class Node:
    """A relational operator. ``columns`` are the plan-unique names of its output."""

    @property
    def columns(self) -> List[str]:
        raise NotImplementedError

    @property
    def children(self) -> List["Node"]:
        return []

    @property
    def row_key(self) -> Optional[List[str]]:
        """Columns (a subset of ``columns``) that identify an output row, if the plan proves one or
        the keys declared on its tables give one."""
        return self.key(declared=True)

    def key(self, declared: bool) -> Optional[List[str]]:
        """The row key; with ``declared`` False, only one the plan proves (group keys, distinct
        rows), not one resting on keys declared on base tables, which the data may violate."""
        return None

    def describe(self) -> str:
        """One line naming the operator and its arguments (what ``explain`` prints)."""
        raise NotImplementedError

    def sources(self) -> FrozenSet[str]:
        found: FrozenSet[str] = frozenset()
        for child in self.children:
            found |= child.sources()
        return found

    def walk(self) -> Iterator["Node"]:
        yield self
        for child in self.children:
            yield from child.walk()


@dataclass(eq=False)
class Scan(Node):
    """A base table; ``source_columns[i]`` is read as ``output_columns[i]`` (None: the constant 1,
    for a table read only to count its rows). ``unique_keys`` are the keys declared on the table
    (source column names), the first one whose columns the scan reads being its row key."""

    table: str
    source_columns: List[Optional[str]] = field(default_factory=list)
    output_columns: List[str] = field(default_factory=list)
    unique_keys: List[List[str]] = field(default_factory=list)

    @property
    def columns(self) -> List[str]:
        return self.output_columns

    def key(self, declared: bool) -> Optional[List[str]]:
        if not declared:
            return None
        by_source = {s.lower(): o for s, o in zip(self.source_columns, self.output_columns) if s is not None}
        for unique_key in self.unique_keys:
            if unique_key and all(k.lower() in by_source for k in unique_key):
                return [by_source[k.lower()] for k in unique_key]
        return None

    def sources(self) -> FrozenSet[str]:
        return frozenset({self.table})

    def describe(self) -> str:
        read = ", ".join(f"{s or '1'} AS {o}" for s, o in zip(self.source_columns, self.output_columns))
        return f"Scan {self.table} [{read}]"


@dataclass(eq=False)
class OneRow(Node):
    """The single row a SELECT without FROM reads (one constant column); it never changes."""

    name: str

    @property
    def columns(self) -> List[str]:
        return [self.name]

    def key(self, declared: bool) -> Optional[List[str]]:
        return []

    def describe(self) -> str:
        return "OneRow"


@dataclass(eq=False)
class Unary(Node):
    """An operator over one input; unless it says otherwise, its rows keep the input's columns
    and row key."""

    child: Node

    @property
    def columns(self) -> List[str]:
        return self.child.columns

    @property
    def children(self) -> List[Node]:
        return [self.child]

    def key(self, declared: bool) -> Optional[List[str]]:
        return self.child.key(declared)


@dataclass(eq=False)
class Project(Unary):
    expressions: List[exp.Expression]
    names: List[str]

    @property
    def columns(self) -> List[str]:
        return self.names

    def renamed(self) -> Optional[Dict[str, str]]:
        """``{output name: child column}`` when every expression is a bare child column, else None."""
        if not all(isinstance(e, exp.Column) and not e.table for e in self.expressions):
            return None
        return {n: e.name for n, e in zip(self.names, self.expressions)}

    def is_rename(self) -> bool:
        """Whether this only renames its child's columns: each kept once, none dropped."""
        renamed = self.renamed()
        return renamed is not None and sorted(renamed.values()) == sorted(self.child.columns)

    def key(self, declared: bool) -> Optional[List[str]]:
        key = self.child.key(declared)
        if key is None:
            return None
        passed = {}
        for name, expression in zip(self.names, self.expressions):
            if isinstance(expression, exp.Column) and expression.name not in passed:
                passed[expression.name] = name
        if not all(k in passed for k in key):
            return None
        return [passed[k] for k in key]

    def describe(self) -> str:
        return "Project " + ", ".join(f"{n} := {expr(e)}" for e, n in zip(self.expressions, self.names))


@dataclass(eq=False)
class Filter(Unary):
    condition: exp.Expression

    def key(self, declared: bool) -> Optional[List[str]]:
        """The first row per partition is keyed by the partition's columns (where they are plain
        columns); otherwise the child's key."""
        first = self.first_row_window()
        if first is not None:
            window, names = first
            partition = window.partition_by
            if partition and all(isinstance(e, exp.Column) and e.name in names for e in partition):
                return [names[e.name] for e in partition]
        return super().key(declared)

    def first_row_window(self) -> Optional[Tuple["Window", Dict[str, str]]]:
        """The ``row_number()`` window this filter keeps the first row of, with ``{window column:
        filter column}`` for the window columns the filter passes on; None when the filter is not
        ``rn = 1`` over projections that rename (and may drop) such a window's columns, keeping
        those its PARTITION BY and ORDER BY read (a column dropped above the window, such as a
        staging view's derived date, leaves which row is first unchanged).

        >>> from dbt.adapters.dyntable.differentiation.planner import plan_query
        >>> first = ("select k, v from (select k, v, {} over (partition by k order by v) as rn"
        ...          " from (select k, v, {} from s.t) s) r where rn = 1")
        >>> def filter_of(sql):
        ...     return plan_query(sql, schema={"s.t": ["k", "v", "w"]}).root.child
        >>> window, names = filter_of(first.format("row_number()", "w")).first_row_window()
        >>> names
        {'c4_k': 'c8_k', 'c5_v': 'c9_v', 'c7_rownumber': 'c10_rn'}
        >>> filter_of(first.format("rank()", "w")).first_row_window() is None
        True
        >>> ordered_by_dropped = first.replace("order by v", "order by w")
        >>> filter_of(ordered_by_dropped.format("row_number()", "w")).first_row_window() is None
        True
        """
        pinned = self.pinned()
        if pinned is None or not (pinned[1].is_int and int(pinned[1].this) == 1):
            return None
        names = {c: c for c in self.columns}
        below: Node = self.child
        while isinstance(below, Project) and _keeps_columns(below):
            names = {child: names[n] for n, child in below.renamed().items()}  # type: ignore[union-attr]
            below = below.child
        if not isinstance(below, Window) or len(below.functions) != 1:
            return None
        function_name, function = below.functions[0]
        if not isinstance(function.this, exp.RowNumber) or names.get(function_name) != pinned[0]:
            return None
        if any(c.name not in names for c in function.find_all(exp.Column)):
            return None
        return below, names

    def pinned(self) -> Optional[Tuple[str, exp.Literal]]:
        """The column and literal of a ``column = literal`` condition: every row holds that value."""
        condition = self.condition
        if not isinstance(condition, exp.EQ):
            return None
        for column, literal in (
            (condition.this, condition.expression),
            (condition.expression, condition.this),
        ):
            if isinstance(column, exp.Column) and not column.table and isinstance(literal, exp.Literal):
                return column.name, literal
        return None

    def describe(self) -> str:
        return f"Filter {expr(self.condition)}"


def _keeps_columns(project: Project) -> bool:
    """Whether ``project`` only passes on columns of its child, each at most once (renamed or
    not, some perhaps dropped)."""
    renamed = project.renamed()
    return renamed is not None and len(set(renamed.values())) == len(renamed)


@dataclass(eq=False)
class Join(Node):
    """``kind`` is one of inner/left/right/full; ``condition`` None means ON TRUE (a cross join
    when inner)."""

    kind: str
    left: Node
    right: Node
    condition: Optional[exp.Expression]

    @property
    def columns(self) -> List[str]:
        return self.left.columns + self.right.columns

    @property
    def children(self) -> List[Node]:
        return [self.left, self.right]

    def key(self, declared: bool) -> Optional[List[str]]:
        left, right = self.left.key(declared), self.right.key(declared)
        if left is None or right is None:
            return None
        return left + right

    def describe(self) -> str:
        condition = expr(self.condition) if self.condition is not None else "TRUE"
        return f"Join {self.kind.upper()} ON {condition}"


@dataclass(eq=False)
class SemiJoin(Node):
    """Rows of ``left`` with (``anti``: without) a row of ``right`` satisfying ``condition``."""

    left: Node
    right: Node
    condition: exp.Expression
    anti: bool

    @property
    def columns(self) -> List[str]:
        return self.left.columns

    @property
    def children(self) -> List[Node]:
        return [self.left, self.right]

    def key(self, declared: bool) -> Optional[List[str]]:
        return self.left.key(declared)

    def describe(self) -> str:
        return f"{'AntiJoin' if self.anti else 'SemiJoin'} ON {expr(self.condition)}"


@dataclass(eq=False)
class UnionAll(Node):
    """Bag union; input ``i`` column ``j`` becomes output column ``names[j]``."""

    inputs: List[Node]
    names: List[str]

    @property
    def columns(self) -> List[str]:
        return self.names

    @property
    def children(self) -> List[Node]:
        return list(self.inputs)

    def describe(self) -> str:
        return "UnionAll -> " + ", ".join(self.names)


@dataclass(eq=False)
class Aggregate(Unary):
    """GROUP BY ``keys`` (expressions over the child) computing ``aggregates``; with no keys, a
    global aggregate: exactly one row, even over an empty input."""

    keys: List[Tuple[str, exp.Expression]]
    aggregates: List[Tuple[str, exp.Expression]]

    @property
    def columns(self) -> List[str]:
        return [name for name, _ in self.keys] + [name for name, _ in self.aggregates]

    def key(self, declared: bool) -> Optional[List[str]]:
        return [name for name, _ in self.keys]

    def describe(self) -> str:
        keys = ", ".join(f"{n} := {expr(e)}" for n, e in self.keys) or "()"
        aggregates = ", ".join(f"{n} := {expr(e)}" for n, e in self.aggregates)
        return f"Aggregate BY {keys} COMPUTE {aggregates}"


@dataclass(eq=False)
class Distinct(Unary):
    def key(self, declared: bool) -> Optional[List[str]]:
        return self.child.key(declared) or list(self.child.columns)

    def describe(self) -> str:
        return "Distinct"


@dataclass(eq=False)
class Window(Unary):
    """Appends ``name = function`` for each of ``functions`` (``exp.Window`` over the child's
    columns, all with the same PARTITION BY) to each row."""

    functions: List[Tuple[str, exp.Window]]

    @property
    def partition_by(self) -> List[exp.Expression]:
        return list(self.functions[0][1].args.get("partition_by") or [])

    @property
    def columns(self) -> List[str]:
        return self.child.columns + [name for name, _ in self.functions]

    def describe(self) -> str:
        return "Window " + ", ".join(f"{n} := {expr(f)}" for n, f in self.functions)


@dataclass(eq=False)
class Plan:
    """A lowered query: ``root`` computes the columns named ``columns`` (in order).

    ``row_key`` is None when there is no key; ``[]`` for a global aggregate (always one row).
    A key the plan proves is preferred to one resting on keys declared on its tables;
    ``row_key_is_declared`` says which it is.
    """

    sql: str
    root: Node
    columns: List[str]

    @property
    def sources(self) -> List[str]:
        return sorted(self.root.sources())

    @property
    def row_key(self) -> Optional[List[str]]:
        proven = self._output_key(declared=False)
        return proven if proven is not None else self._output_key(declared=True)

    @property
    def row_key_is_declared(self) -> bool:
        return self._output_key(declared=False) is None and self.row_key is not None

    def _output_key(self, declared: bool) -> Optional[List[str]]:
        key = self.root.key(declared)
        if key is None:
            return None
        output = dict(zip(self.root.columns, self.columns))
        return [output[k] for k in key] if all(k in output for k in key) else None

    def is_monotone(self) -> bool:
        """Inserts into the sources only ever insert into the result (no deletes, no updates)."""
        return all(is_monotone_node(node) for node in self.root.walk())


def is_monotone_node(node: Node) -> bool:
    """Whether the operator alone maps inserted input rows to inserted output rows only."""
    if isinstance(node, Join):
        return node.kind == "inner"
    if isinstance(node, SemiJoin):
        return not node.anti
    return not isinstance(node, (Aggregate, Window))


class Names:
    """Mints plan-unique column names that still say which column they came from."""

    def __init__(self) -> None:
        self._count = 0

    def mint(self, hint: str) -> str:
        self._count += 1
        readable = re.sub(r"[^a-z0-9_]+", "_", hint.lower()).strip("_")[:24] or "expr"
        return f"c{self._count}_{readable}"
