"""The range of each column's values in a data file, from the statistics writers record in the
log (``minValues``, ``maxValues``, ``nullCount``): what lets a refresh rescan only the files a
change can touch (docs/ARCHITECTURE.md, "Pruned rescans").

Only integer, date and timestamp columns are kept: their statistics are exact, but for
timestamps, which Delta truncates to milliseconds (the upper bound is widened by one). Strings
are truncated to a prefix and floating point may hold NaN, so neither bounds its values.
"""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone
from typing import Any, Dict, Mapping, Optional

from dbt.adapters.dyntable.delta_log.model import ValueRange

#: Delta's primitive types whose statistics bound the values, by name in the schema.
BOUNDED_TYPES = frozenset({"long", "integer", "short", "byte", "date", "timestamp"})
_MILLISECOND = timedelta(milliseconds=1)


def bounded_columns(schema_json: str, column_mapping_mode: str) -> Dict[str, str]:
    """``{column name: Delta type}`` of the top-level columns whose statistics bound them; none
    where column mapping names the statistics by physical names."""
    if column_mapping_mode != "none":
        return {}
    fields = json.loads(schema_json).get("fields", [])
    return {
        f["name"]: f["type"] for f in fields if isinstance(f.get("type"), str) and f["type"] in BOUNDED_TYPES
    }


def from_stats(
    minimum: Optional[Mapping[str, Any]],
    maximum: Optional[Mapping[str, Any]],
    nulls: Optional[Mapping[str, Any]],
    records: Optional[int],
    columns: Mapping[str, str],
) -> Dict[str, ValueRange]:
    """Each of ``columns``' range in a file of ``records`` rows, keyed by lower-case name, from
    its statistics as the log's JSON holds them or as ``deltalake`` types them."""
    ranges: Dict[str, ValueRange] = {}
    for name, kind in columns.items():
        low = _typed(kind, (minimum or {}).get(name))
        high = _typed(kind, (maximum or {}).get(name))
        null_count = (nulls or {}).get(name)
        if null_count is None:
            continue
        if low is None or high is None:
            if records is not None and null_count == records:  # all NULL
                ranges[name.lower()] = ValueRange(None, None, True)
            continue
        if kind == "timestamp":
            high = high + _MILLISECOND
        ranges[name.lower()] = ValueRange(low, high, null_count > 0)
    return ranges


def _typed(kind: str, value: Any) -> Any:
    """A statistic as a Python value: int, date, or aware datetime; None where it is not one."""
    if value is None:
        return None
    if kind == "date":
        if isinstance(value, datetime):
            return None
        return value if isinstance(value, date) else _parsed(date.fromisoformat, value)
    if kind == "timestamp":
        parsed = value if isinstance(value, datetime) else _parsed(datetime.fromisoformat, value)
        if parsed is None or parsed.tzinfo is None:
            return None
        return parsed.astimezone(timezone.utc)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _parsed(parse: Any, value: Any) -> Any:
    if not isinstance(value, str):
        return None
    try:
        return parse(value)
    except ValueError:
        return None
