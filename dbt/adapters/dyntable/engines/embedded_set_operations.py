"""Set operations Sail would run into wrong values, refused before they run (docs/ARCHITECTURE.md,
"Engines"): Sail types a set operation's column as its first branch's and casts the other
branches' values to it, where Spark widens the column."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional, Union

import sqlglot
from sqlglot import exp

from dbt.adapters.dyntable.engines.base import EngineGap
from dbt.adapters.dyntable.vocabulary import DIALECT

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DataType, StructField, StructType

#: A set operation's keyword: a query without one needs no parse to check its branches' types.
_SET_OPERATION = re.compile(r"\b(union|intersect|except|minus)\b", re.IGNORECASE)


def checked_schema(spark: "SparkSession", query: Union[str, exp.Expression]) -> "StructType":
    """The columns ``query`` returns, as Sail analyses it, after refusing a set operation
    Sail would run into wrong values (:func:`_set_operation_gap`)."""
    sql = query if isinstance(query, str) else query.sql(dialect=DIALECT)
    schema = spark.sql(sql).schema
    if isinstance(query, str) and not _SET_OPERATION.search(query):
        return schema
    try:
        parsed = sqlglot.parse_one(query, read=DIALECT) if isinstance(query, str) else query
    except sqlglot.errors.ParseError:
        return schema
    gap = _set_operation_gap(spark, parsed)
    if gap is not None:
        raise EngineGap(gap)
    return schema


def _set_operation_gap(spark: "SparkSession", parsed: exp.Expr) -> Optional[str]:
    """Why Sail would run a set operation of ``parsed`` into wrong values, or None.

    Sail 0.7 types a set operation's column as its first branch's, and casts the other branches'
    values to that type as it writes them; Spark widens the column instead (a bigint UNION ALL a
    string is a string). Where a later branch's type fits in the first's (an int after a bigint,
    anything after a string) the values are Spark's; where it does not they may change without
    a word: strings that are no numbers or dates become NULL, a double after a bigint is
    truncated, a wider decimal rounded (docs/ARCHITECTURE.md, "Engines"). A string literal whose
    value survives the cast is let through (dbt's fixtures write dates so), and integers that
    overflow fail loudly in Sail's cast. A bare NULL takes any type."""
    ctes = parsed.args.get("with")
    for operation in parsed.find_all(exp.SetOperation):
        sides = []
        for branch in (operation.left, operation.right):
            probe = exp.select("*").from_(branch.copy().subquery("branch"))
            if ctes is not None:
                probe.set("with", ctes.copy())
            try:
                sides.append(spark.sql(probe.sql(dialect=DIALECT)).schema.fields)
            except Exception:  # noqa: BLE001 - a branch that cannot stand alone: not checked
                break
        else:
            later = operation.right.selects if isinstance(operation.right, exp.Select) else []
            for index, (first, other) in enumerate(zip(*sides)):
                if _fits(other.dataType, first.dataType):
                    continue
                value = later[index].unalias() if index < len(later) else None
                if isinstance(value, exp.Literal) and value.is_string and _survives(spark, value, first):
                    continue
                types = (first.dataType.simpleString(), other.dataType.simpleString())
                wanted = next((t for t in ("string", "double") if t in types), types[1])
                return (
                    f"The branches of a {operation.key.upper()} give column {first.name} two types, "
                    f"{types[0]} and {types[1]}, which the embedded engine (Sail) cannot combine: it "
                    "would store wrong values. Cast the column to one type in every branch, e.g. "
                    f"cast({first.name} as {wanted}) as {first.name}."
                )
    return None


def _fits(other: "DataType", first: "DataType") -> bool:
    """Whether every value of type ``other`` is kept by a cast to ``first``."""
    from pyspark.sql import types as t

    integral = (t.ByteType, t.ShortType, t.IntegerType, t.LongType)
    if other == first or isinstance(other, t.NullType) or isinstance(first, t.StringType):
        return True
    if isinstance(other, integral) and isinstance(first, integral):
        return True  # an overflow fails Sail's cast: loud, never silent
    if isinstance(other, (t.ByteType, t.ShortType, t.IntegerType, t.FloatType)):
        return isinstance(first, t.DoubleType)
    if isinstance(other, t.DecimalType) and isinstance(first, t.DecimalType):
        return first.scale >= other.scale and first.precision - first.scale >= other.precision - other.scale
    return isinstance(other, t.DateType) and isinstance(first, t.TimestampType)


def _survives(spark: "SparkSession", literal: exp.Literal, column: "StructField") -> bool:
    """Whether the string ``literal`` cast to ``column``'s type reads back as itself."""
    text = literal.sql(dialect=DIALECT)
    typed = f"CAST({text} AS {column.dataType.simpleString()})"
    row = spark.sql(f"SELECT CAST({typed} AS STRING) = {text} AS same").collect()[0]
    return bool(row["same"])
