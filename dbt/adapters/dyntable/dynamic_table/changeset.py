"""A dynamic table's settings against those its table was built with: one component per setting,
each knowing its value from the model and from the existing table, its diff, and whether a change
needs a rebuild (docs/ARCHITECTURE.md, "Configuration changes").

Where each setting of the existing table is recorded differs, and each component reads it there:
the query (with its keys and partitioning) and the refresh mode from the DT's frontier, the target
lag from its graph row, the clustering from the engine's table detail, the comments from its Delta
log. A change that needs a rebuild (``requires_full_refresh``) is the reason of a REINITIALIZE,
under the ``on_configuration_change`` policy for the query; the others are applied in place.

>>> from dbt.adapters.dyntable.dynamic_table.config import DynamicTableConfig
>>> mode = RefreshMode.from_config(DynamicTableConfig.from_model("m", {"target_lag": "1 hour"}))
>>> str(mode.get_diff("full"))
'refresh mode changed from full to auto'
>>> mode.get_diff("auto") is None
True
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar, Dict, Generic, Iterable, List, Mapping, Optional, Tuple, TypeVar

from dbt.adapters.dyntable.dynamic_table.config import DynamicTableConfig
from dbt.adapters.dyntable.dynamic_table.model import Docs
from dbt.adapters.dyntable.vocabulary import fingerprint

if TYPE_CHECKING:
    from dbt.adapters.dyntable.dynamic_table.metadata import Frontier, GraphRow

Value = TypeVar("Value")
#: The rebuild reason of a changed query (:class:`QueryDefinition`).
DEFINITION_CHANGED = "definition changed"


@dataclass(frozen=True)
class SettingChange:
    """One setting whose wanted value differs from the existing table's."""

    setting: str
    before: str
    after: str
    requires_full_refresh: bool
    #: How the change reads when its values say nothing to a user (a fingerprint).
    summary: Optional[str] = None

    def __str__(self) -> str:
        return self.summary or f"{self.setting} changed from {self.before} to {self.after}"


@dataclass(frozen=True)
class Changeset:
    """The settings that changed, in the order their components are listed."""

    changes: Tuple[SettingChange, ...] = ()

    @property
    def requires_full_refresh(self) -> bool:
        return any(c.requires_full_refresh for c in self.changes)

    def get(self, setting: str) -> Optional[SettingChange]:
        return next((c for c in self.changes if c.setting == setting), None)

    def without(self, setting: str) -> "Changeset":
        return Changeset(tuple(c for c in self.changes if c.setting != setting))

    def rebuild_reason(self) -> Optional[str]:
        """Why the table is rebuilt: its changes that need it, or None."""
        rebuilding = [str(c) for c in self.changes if c.requires_full_refresh]
        return "; ".join(rebuilding) or None


class Component(Generic[Value]):
    """One setting: its wanted value, and its diff against the existing table's."""

    setting: ClassVar[str]
    requires_full_refresh: ClassVar[bool]

    def __init__(self, wanted: Value) -> None:
        self.wanted = wanted

    def get_diff(self, existing: Value) -> Optional[SettingChange]:
        """The change from ``existing`` to the wanted value, or None when there is none."""
        if self.same(existing):
            return None
        return SettingChange(
            self.setting, self.shown(existing), self.shown(self.wanted), self.requires_full_refresh
        )

    def same(self, existing: Value) -> bool:
        return existing == self.wanted

    def shown(self, value: Value) -> str:
        return str(value)


class QueryDefinition(Component[str]):
    """The query with its unique keys and partitioning, as a fingerprint: a change rebuilds the
    table, as the ``on_configuration_change`` policy allows. Its target lag is left out on
    purpose: a lag change applies without a rebuild."""

    setting = "definition"
    requires_full_refresh = True

    @classmethod
    def from_model(cls, sql: str, config: DynamicTableConfig) -> "QueryDefinition":
        normalized = " ".join(sql.split())
        material = "\n".join([normalized, ",".join(config.unique_key), ",".join(config.partition_by)])
        return cls(fingerprint(material))

    def get_diff(self, existing: str) -> Optional[SettingChange]:
        change = super().get_diff(existing)
        return None if change is None else replace(change, summary=DEFINITION_CHANGED)


class RefreshMode(Component[str]):
    """``refresh_mode``: a change rebuilds the table, so that a FULL-only table turned incremental
    starts from a frontier its own mode wrote."""

    setting = "refresh mode"
    requires_full_refresh = True

    @classmethod
    def from_config(cls, config: DynamicTableConfig) -> "RefreshMode":
        return cls(config.refresh_mode)


class TargetLag(Component[str]):
    """``target_lag``: applied without a rebuild, from the graph row that records it."""

    setting = "target lag"
    requires_full_refresh = False

    @classmethod
    def from_config(cls, config: DynamicTableConfig) -> "TargetLag":
        return cls(str(config.target_lag))


class Clustering(Component[Tuple[str, ...]]):
    """``cluster_by``: applied in place (a metadata-only commit), in any order of its columns."""

    setting = "cluster_by"
    requires_full_refresh = False

    @classmethod
    def from_config(cls, config: DynamicTableConfig) -> "Clustering":
        return cls(_columns(config.cluster_by))

    @classmethod
    def existing(cls, columns: Iterable[object]) -> Tuple[str, ...]:
        """The clustering columns the engine's table detail lists, as this component compares them."""
        return _columns(columns)

    def same(self, existing: Tuple[str, ...]) -> bool:
        return sorted(existing) == sorted(self.wanted)

    def shown(self, value: Tuple[str, ...]) -> str:
        return f"({', '.join(value)})" if value else "none"


#: The table's comment under :class:`Comments`, beside its columns'.
TABLE_COMMENT = ""


class Comments(Component[Mapping[str, str]]):
    """The comments ``persist_docs`` asks for, the table's (under ``TABLE_COMMENT``) and each
    documented column's by lowercase name; applied in place. A comment the docs do not ask for is
    left as it is: only the asked ones that the table lacks are a change."""

    setting = "comments"
    requires_full_refresh = False

    @classmethod
    def from_docs(cls, docs: Docs) -> "Comments":
        wanted: Dict[str, str] = {name.lower(): text for name, text in docs.columns.items()}
        if docs.table:
            wanted[TABLE_COMMENT] = docs.table
        return cls(wanted)

    def missing(self, existing: Mapping[str, str]) -> List[str]:
        """The table (``TABLE_COMMENT``) and the columns whose asked comment ``existing`` lacks."""
        return [name for name, text in self.wanted.items() if text and existing.get(name) != text]

    def same(self, existing: Mapping[str, str]) -> bool:
        return not self.missing(existing)

    def shown(self, value: Mapping[str, str]) -> str:
        named = sorted("the table" if n == TABLE_COMMENT else n for n in value)
        return f"comments on {', '.join(named)}" if named else "no comments"


def definition_changes(sql: str, config: DynamicTableConfig, frontier: "Frontier") -> Changeset:
    """What changed of the settings a frontier records: the definition and the refresh mode."""
    diffs = (
        QueryDefinition.from_model(sql, config).get_diff(frontier.definition_hash),
        RefreshMode.from_config(config).get_diff(frontier.refresh_mode),
    )
    return Changeset(tuple(d for d in diffs if d is not None))


def since_built(
    sql: str, config: DynamicTableConfig, frontier: Optional["Frontier"], graph: Optional["GraphRow"]
) -> str:
    """What changed of the settings the DT's metadata records since its last refresh, and what
    the next refresh makes of each (``dyntable explain`` prints it); empty when nothing did."""
    changes = definition_changes(sql, config, frontier) if frontier is not None else Changeset()
    lag = TargetLag.from_config(config).get_diff(graph.target_lag) if graph is not None else None
    said = []
    for change in changes.changes + ((lag,) if lag is not None else ()):
        if change.setting == QueryDefinition.setting and config.on_configuration_change != "apply":
            outcome = {
                "continue": "the previous definition is kept (on_configuration_change: continue)",
                "fail": "the next refresh fails (on_configuration_change: fail)",
            }[config.on_configuration_change]
        elif change.requires_full_refresh:
            outcome = "the next refresh rebuilds the table"
        else:
            outcome = "applied at the next refresh, without a rebuild"
        said.append(f"{change}: {outcome}")
    return "; ".join(said)


def definition_hash(sql: str, config: DynamicTableConfig) -> str:
    """The fingerprint a frontier records of the definition (:class:`QueryDefinition`)."""
    return QueryDefinition.from_model(sql, config).wanted


def _columns(columns: Iterable[object]) -> Tuple[str, ...]:
    return tuple(str(c).lower() for c in columns)
