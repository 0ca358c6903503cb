"""What column resolution sees at a point of the query: the relations of each enclosing SELECT
(innermost first), their columns, and the CTEs in reach."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from sqlglot import exp

from dbt.adapters.dyntable.differentiation.errors import NotIncrementalizable
from dbt.adapters.dyntable.differentiation.plan import Names, Node, Scan


@dataclass
class Source:
    """One relation in a FROM clause, as seen by column resolution."""

    alias: str
    node: Node
    known: Dict[str, str] = field(default_factory=dict)  # lower-case name -> plan column
    order: List[str] = field(default_factory=list)  # names in output order, for `*`
    scan: Optional[Scan] = None  # set while columns of a base table can still be discovered
    schema: Optional[List[str]] = None  # the base table's declared columns, if given

    @property
    def certain(self) -> bool:
        """Whether ``known`` (or ``schema``) lists every column this source has."""
        return self.scan is None or self.schema is not None

    def has(self, name: str) -> bool:
        if name.lower() in self.known:
            return True
        return self.schema is not None and name.lower() in {c.lower() for c in self.schema}

    def can_have(self, name: str) -> bool:
        """Whether ``name`` is, or for all the planner knows may be, a column of this source."""
        return self.has(name) or not self.certain

    def lookup(self, name: str, names: Names) -> str:
        key = name.lower()
        if key not in self.known:
            assert self.scan is not None, "closed sources only answer for their known columns"
            spelled = name
            if self.schema is not None:
                spelled = next(c for c in self.schema if c.lower() == key)
            internal = names.mint(spelled)
            self.scan.source_columns.append(spelled)
            self.scan.output_columns.append(internal)
            self.known[key] = internal
            self.order.append(spelled)
        return self.known[key]

    def star(self, names: Names, fragment: str) -> List[Tuple[str, str]]:
        if self.scan is not None:
            if self.schema is None:
                raise NotIncrementalizable(
                    "star",
                    fragment,
                    f"the columns of {self.scan.table} are not known while planning; list the "
                    "columns or pass the table's schema",
                )
            return [(c, self.lookup(c, names)) for c in self.schema]
        return [(name, self.known[name.lower()]) for name in self.order]


@dataclass
class Scope:
    sources: List[Source]
    outer: Optional["Scope"] = None
    #: USING columns by lower-case name: their spelling and the expression Spark gives them.
    using: Dict[str, Tuple[str, exp.Expression]] = field(default_factory=dict)

    def by_alias(self, alias: str) -> Optional[Source]:
        for source in self.sources:
            if source.alias.lower() == alias.lower():
                return source
        return None


@dataclass
class Env:
    """CTEs visible at a point of the query: name -> (definition, the env it was defined in)."""

    ctes: Dict[str, Tuple[exp.Expression, "Env", List[str]]] = field(default_factory=dict)
