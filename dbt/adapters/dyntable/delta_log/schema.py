"""Delta schemas (JSON) compared column by column, and the partition values they type."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
)

#: Types of partition column whose values, strings in an ``add`` action, ``Snapshots._applied``
#: types itself, as ``deltalake`` does. A table partitioned by any other type (timestamps, whose
#: strings writers disagree on the time zone of; binary) is loaded by ``deltalake``.
APPLIED_PARTITION_TYPES = (
    StringType,
    DateType,
    BooleanType,
    ByteType,
    ShortType,
    IntegerType,
    LongType,
    FloatType,
    DoubleType,
    DecimalType,
)


def without_comments(schema: Any) -> Any:
    """A Delta schema (JSON) without its columns' comments: documentation (``persist_docs``)
    changes no row, so a comment changed on a source is no schema change.

    >>> without_comments({"fields": [{"name": "a", "metadata": {"comment": "x", "k": 1}}]})
    {'fields': [{'name': 'a', 'metadata': {'k': 1}}]}
    """
    if isinstance(schema, list):
        return [without_comments(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    kept = {key: without_comments(value) for key, value in schema.items()}
    if isinstance(kept.get("metadata"), dict):
        kept["metadata"] = {k: v for k, v in kept["metadata"].items() if k != "comment"}
    return kept


def typed_partition_values(
    schema: StructType, columns: Tuple[str, ...], serialized: List[Mapping[str, Optional[str]]]
) -> Optional[List[Dict[str, Any]]]:
    """The partition values of files as ``deltalake`` types them, from the strings their ``add``
    actions record (``serialized``, one mapping per file; Delta's partition value serialization:
    ``2026-01-31``, ``true``, ``12.50``). None when a column's type is not one of
    :data:`APPLIED_PARTITION_TYPES`, or a value is empty (which the protocol reads as null,
    where a writer may not have meant it) or does not parse: the caller loads with ``deltalake``.

    >>> from pyspark.sql.types import StructField
    >>> schema = StructType([StructField("day", DateType()), StructField("n", IntegerType())])
    >>> typed_partition_values(schema, ("day", "n"), [{"day": "2026-01-31", "n": None}])
    [{'day': datetime.date(2026, 1, 31), 'n': None}]
    >>> typed_partition_values(schema, ("n",), [{"n": "1.5"}]) is None
    True
    """
    if not columns:
        return [{} for _ in serialized]
    types = {f.name: f.dataType for f in schema.fields}
    typed: Dict[str, List[Any]] = {}
    for column in columns:
        data_type = types.get(column)
        strings = [values.get(column) for values in serialized]
        if not isinstance(data_type, APPLIED_PARTITION_TYPES) or "" in strings:
            return None
        try:
            typed[column] = pa.array(strings, pa.string()).cast(to_arrow_type(data_type)).to_pylist()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
    return [{column: typed[column][i] for column in columns} for i in range(len(serialized))]


def schema_change(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """What changed between two Delta schemas (JSON), column by column, in words.

    >>> a = {"fields": [{"name": "id", "type": "long"}, {"name": "v", "type": "string"}]}
    >>> b = {"fields": [{"name": "id", "type": "integer"}, {"name": "w", "type": "string"}]}
    >>> schema_change(a, b)
    'added w; dropped v; id is now integer, was long'
    """
    old = {f["name"]: f for f in before.get("fields") or []}
    new = {f["name"]: f for f in after.get("fields") or []}
    parts = [f"added {name}" for name in new if name not in old]
    parts += [f"dropped {name}" for name in old if name not in new]
    for name in [n for n in new if n in old and new[n] != old[n]]:
        if new[name].get("type") != old[name].get("type"):
            parts.append(
                f"{name} is now {_type_text(new[name]['type'])}, was {_type_text(old[name]['type'])}"
            )
        else:
            parts.append(f"{name} changed nullability or metadata")
    return "; ".join(parts) or "column order or table metadata"


def _type_text(delta_type: Any) -> str:
    return delta_type if isinstance(delta_type, str) else str(delta_type.get("type", delta_type))
