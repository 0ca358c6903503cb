"""The `dynamic_table` model config: parsing and validation.

Every error names the model, the key and the accepted forms, so a typo in `target_lag` reads as
``Model 'orders_dt': target_lag '5 minuts' is not valid. Use '<n> seconds|minutes|hours|days' or
'downstream'.``

>>> TargetLag.parse("5 minutes").seconds
300
>>> TargetLag.parse("downstream").is_downstream
True
>>> DynamicTableConfig.from_model("m", {"target_lag": "1 hour"}).refresh_mode
'auto'
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any, FrozenSet, Iterable, Mapping, Optional, Sequence, Tuple

from dbt.adapters.dyntable.dynamic_table.immutable_where import TABLE_NAME, immutability_problem

REFRESH_MODES = ("auto", "full", "incremental")
INITIALIZE = ("on_create", "on_schedule")
ON_CONFIGURATION_CHANGE = ("apply", "continue", "fail")
#: How a refresh checks its result against the query (docs/ARCHITECTURE.md, "Verifying").
VERIFY_MODES = ("sample", "full")
VERIFY_FAILURE = ("error", "warn")
FILE_FORMATS = ("delta",)
UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
LAG_PATTERN = re.compile(r"^\s*(\d+)\s*(second|minute|hour|day)s?\s*$", re.IGNORECASE)
LAG_FORMS = "'<n> seconds|minutes|hours|days' (e.g. '5 minutes') or 'downstream'"
#: Delta's auto compaction default (``spark.databricks.delta.autoCompact.minNumFiles``).
COMPACT_AFTER_FILES = 50
#: The keys a dynamic table reads from its model's config (README, "Config").
DYNAMIC_TABLE_KEYS = frozenset(
    {
        "target_lag",
        "refresh_mode",
        "initialize",
        "on_configuration_change",
        "unique_key",
        "partition_by",
        "cluster_by",
        "deterministic_functions",
        "full_refresh",
        "max_change_ratio",
        "max_change_rows",
        "immutable_where",
        "backfill_from",
        "verify",
        "verify_failure",
        "file_format",
        "auto_compact",
    }
)


class DynamicTableConfigError(ValueError):
    """A dynamic table's config is invalid; the message names model, key and accepted forms."""


@dataclass(frozen=True)
class TargetLag:
    """How stale a dynamic table may become: a duration, or DOWNSTREAM (lag of its consumers)."""

    seconds: Optional[int]

    @property
    def is_downstream(self) -> bool:
        return self.seconds is None

    @classmethod
    def parse(cls, text: str) -> "TargetLag":
        if text.strip().lower() == "downstream":
            return cls(None)
        match = LAG_PATTERN.match(text)
        if not match or int(match.group(1)) <= 0:
            raise ValueError(text)
        return cls(int(match.group(1)) * UNITS[match.group(2).lower()])

    def __str__(self) -> str:
        if self.seconds is None:
            return "downstream"
        for unit in ("day", "hour", "minute"):
            size = UNITS[unit]
            if self.seconds % size == 0:
                count = self.seconds // size
                return f"{count} {unit}{'s' if count != 1 else ''}"
        return f"{self.seconds} seconds"


@dataclass(frozen=True)
class DynamicTableConfig:
    target_lag: TargetLag
    refresh_mode: str = "auto"
    initialize: str = "on_create"
    on_configuration_change: str = "apply"
    unique_key: Tuple[str, ...] = ()
    partition_by: Tuple[str, ...] = ()
    #: UDFs the query calls that return the same result for the same arguments, so a derivative
    #: may evaluate them again (unknown functions otherwise make the query FULL-only).
    deterministic_functions: Tuple[str, ...] = ()
    #: dbt's ``full_refresh`` model config: True or False override ``--full-refresh``.
    full_refresh: Optional[bool] = None
    #: The change fuse (docs/ARCHITECTURE.md, "Change fuse"): the most one refresh may change of
    #: the DT, as a share of its rows and as a number of rows; None: no limit.
    max_change_ratio: Optional[float] = None
    max_change_rows: Optional[int] = None
    #: Immutability (docs/ARCHITECTURE.md, "Immutable rows"): a predicate over the DT's columns
    #: marking rows refreshes never change, and a table whose rows in that region the first
    #: build copies instead of computing them.
    immutable_where: Optional[str] = None
    backfill_from: Optional[str] = None
    #: Check the DT against its query after each refresh that writes it: ``sample``, ``full`` or
    #: None (off); on a mismatch fail the refresh (``error``) or warn (docs/ARCHITECTURE.md,
    #: "Verifying").
    verify: Optional[str] = None
    verify_failure: str = "error"
    #: Delta liquid clustering columns (docs/ARCHITECTURE.md, "Table features").
    cluster_by: Tuple[str, ...] = ()
    #: After a refresh that wrote it, compact the DT once a partition holds this many small
    #: files (``auto_compact``: true is Delta's default, false is None: never; docs/ARCHITECTURE.md,
    #: "Compaction").
    compact_after_files: Optional[int] = COMPACT_AFTER_FILES
    #: What the user should hear about this config though it is valid (keys it does not know).
    warnings: Tuple[str, ...] = field(default=(), compare=False)

    @property
    def recomputes_when_unsure(self) -> bool:
        """Whether an incremental refresh whose delta fails a check may recompute the DT instead
        (AUTO's), rather than fail: it may then fold changes under checks (``aggregate.py``)."""
        return self.refresh_mode == "auto"

    @classmethod
    def from_model(
        cls, model: str, config: Mapping[str, Any], known: Iterable[str] = ()
    ) -> "DynamicTableConfig":
        """The config of ``model``; a key that is neither a dynamic table's nor in ``known``
        (dbt's and the adapter's own model configs) is a warning naming the closest key."""
        read = _ConfigReader(model, config)
        file_format = config.get("file_format") or "delta"
        if file_format not in FILE_FORMATS:
            raise read.fail("file_format", file_format, "'delta' (dynamic tables are Delta tables)")
        immutable_where, backfill_from = _immutability(model, config)
        partition_by, cluster_by = _layout(model, read.names("partition_by"), read.names("cluster_by"))
        verify = config.get("verify")
        return cls(
            target_lag=_target_lag(model, config.get("target_lag")),
            refresh_mode=read.choice("refresh_mode", REFRESH_MODES, "auto"),
            initialize=read.choice("initialize", INITIALIZE, "on_create"),
            on_configuration_change=read.choice("on_configuration_change", ON_CONFIGURATION_CHANGE, "apply"),
            unique_key=read.names("unique_key"),
            partition_by=partition_by,
            deterministic_functions=tuple(
                f.lower() for f in read.names("deterministic_functions", "function")
            ),
            full_refresh=None if config.get("full_refresh") is None else bool(config.get("full_refresh")),
            max_change_ratio=read.positive("max_change_ratio", float, "0.5: half the table's rows"),
            max_change_rows=read.positive("max_change_rows", int, "100000"),
            immutable_where=immutable_where,
            backfill_from=backfill_from,
            verify=None if verify is None or verify is False else read.choice("verify", VERIFY_MODES, ""),
            verify_failure=read.choice("verify_failure", VERIFY_FAILURE, "error"),
            cluster_by=cluster_by,
            compact_after_files=_compact_after_files(model, config.get("auto_compact", True)),
            warnings=unknown_keys(model, config, DYNAMIC_TABLE_KEYS | frozenset(known)),
        )


@dataclass(frozen=True)
class _ConfigReader:
    """The values of one model's config, typed; a bad one is an error naming the model, the key
    and the accepted forms."""

    model: str
    config: Mapping[str, Any]

    def fail(self, key: str, value: Any, accepted: str) -> DynamicTableConfigError:
        return DynamicTableConfigError(f"Model '{self.model}': {key} {value!r} is not valid. Use {accepted}.")

    def choice(self, key: str, allowed: Sequence[str], default: str) -> str:
        value = self.config.get(key)
        if value is None:
            return default
        if not isinstance(value, str) or value.lower() not in allowed:
            raise self.fail(key, value, " | ".join(allowed))
        return value.lower()

    def names(self, key: str, what: str = "column") -> Tuple[str, ...]:
        value = self.config.get(key)
        if value is None:
            return ()
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)) or not all(isinstance(i, str) and i.strip() for i in items):
            raise self.fail(key, value, f"a {what} name or a list of {what} names")
        return tuple(i.strip() for i in items)

    def positive(self, key: str, kind: type, example: str) -> Any:
        value = self.config.get(key)
        if value is None:
            return None
        try:
            number = kind(value)
        except (TypeError, ValueError):
            number = 0
        if isinstance(value, bool) or number <= 0 or (kind is int and number != value):
            whole = "whole " if kind is int else ""
            raise self.fail(key, value, f"a positive {whole}number (e.g. {example})")
        return number


def unknown_keys(model: str, config: Mapping[str, Any], known: FrozenSet[str]) -> Tuple[str, ...]:
    """One warning per key of ``config`` that is not in ``known``, naming the closest known key:
    a misspelled key (``refresh_mod``) would otherwise be ignored without a word."""
    warnings = []
    for key in sorted(k for k in config if isinstance(k, str) and k not in known and not k.startswith("_")):
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
        hint = (
            f"did you mean {close[0]!r}?"
            if close
            else f"a dynamic table takes {', '.join(sorted(DYNAMIC_TABLE_KEYS))} and dbt's own configs"
        )
        warnings.append(
            f"Model '{model}': config key {key!r} is not one dbt-dyntable or dbt knows, and is ignored "
            f"({hint})."
        )
    return tuple(warnings)


def _layout(
    model: str, partition_by: Tuple[str, ...], cluster_by: Tuple[str, ...]
) -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
    if partition_by and cluster_by:
        raise DynamicTableConfigError(
            f"Model '{model}': cluster_by and partition_by are both set. Delta liquid clustering "
            "replaces partitioning: keep one of them."
        )
    return partition_by, cluster_by


def _compact_after_files(model: str, value: Any) -> Optional[int]:
    if value is True:
        return COMPACT_AFTER_FILES
    if value is False:
        return None
    if isinstance(value, int) and value >= 2:
        return value
    raise DynamicTableConfigError(
        f"Model '{model}': auto_compact {value!r} is not valid. Use true (compact once a partition "
        f"holds {COMPACT_AFTER_FILES} small files), false (never), or a whole number of files, 2 or more."
    )


def _target_lag(model: str, lag: Any) -> TargetLag:
    if lag is None:
        raise DynamicTableConfigError(
            f"Model '{model}': a dynamic table needs target_lag. Set it to {LAG_FORMS}."
        )
    try:
        return TargetLag.parse(str(lag))
    except ValueError:
        raise DynamicTableConfigError(
            f"Model '{model}': target_lag {lag!r} is not valid. Use {LAG_FORMS}."
        ) from None


def _immutability(model: str, config: Mapping[str, Any]) -> Tuple[Optional[str], Optional[str]]:
    """`immutable_where` and `backfill_from`, validated (docs/ARCHITECTURE.md, "Immutable rows")."""
    immutable_where, backfill_from = config.get("immutable_where"), config.get("backfill_from")
    if immutable_where is not None:
        problem = immutability_problem(immutable_where)
        if problem is not None:
            raise DynamicTableConfigError(f"Model '{model}': immutable_where {immutable_where!r} {problem}")
    if backfill_from is not None:
        if immutable_where is None:
            raise DynamicTableConfigError(
                f"Model '{model}': backfill_from needs immutable_where: the backfilled rows are those "
                "it marks immutable (the rest is computed). Set immutable_where too."
            )
        if not isinstance(backfill_from, str) or not TABLE_NAME.match(backfill_from):
            raise DynamicTableConfigError(
                f"Model '{model}': backfill_from {backfill_from!r} is not valid. "
                "Use a table name, schema.table."
            )
    return immutable_where, backfill_from
