"""The words every layer shares, each defined once (docs/ARCHITECTURE.md, "Vocabulary").

* **Weights.** A delta is a Z-set: the relation's columns plus :data:`WEIGHT`, an integer
  multiplicity (+n: n copies appear, -n: n copies go away).
* **Consolidation.** :func:`consolidate` sums the weights of identical tuples and drops the tuples
  whose weights cancel: at most one row per distinct tuple (NULLs equal), never weight 0.
* **Quoting.** :func:`quote` an identifier, :func:`sql_string` a literal, for Spark SQL.
* **Names.** :func:`relation_name` is how a table is named everywhere outside SQL text:
  ``schema.table``, lower case (Spark resolves identifiers case-insensitively); :func:`table_name`
  gives it for a table named in SQL.
* **Matching.** :func:`null_safe_match` compares two relations' columns with ``<=>``, as GROUP BY
  and DISTINCT compare them (NULL equals NULL).
* **Fingerprints.** :func:`fingerprint` is how a text (a commit, a definition) is identified:
  16 hex digits of its SHA-256.
* **Checks.** :func:`failed_check` is the SQL that fails a statement when a check inside it
  fails (``raise_error``), its message :data:`ENGINE_CHECK` and a code saying which.
* **Errors.** :func:`first_line` is how an engine's or a library's error is quoted in a message:
  its first line, without the Rust or JVM backtrace that follows.

>>> quote("a`b")
'`a``b`'
>>> table_name("Shop.`Orders`"), table_name("orders", default_schema="Shop")
('shop.orders', 'shop.orders')
>>> null_safe_match(["k"], "t", "s")
't.`k` <=> s.`k`'
"""

from __future__ import annotations

import hashlib
from typing import Optional, Sequence, Union

from sqlglot import exp

DIALECT = "spark"
#: The materialization a dynamic table's model declares (`materialized='dynamic_table'`).
DYNAMIC_TABLE = "dynamic_table"
# sqlglot loads a dialect, and builds its parser, on first use (tens of milliseconds): here, at
# import, rather than inside the first refresh of a process.
exp.to_table("warm.up", dialect=DIALECT)
WEIGHT = "_dyn_weight"
#: The sum of weights while consolidating: its own name, because Sail resolves ``_dyn_weight``
#: in a HAVING to the output alias.
WEIGHT_SUM = "_dyn_sum"
#: Columns a source may not have: refreshes add them to its rows.
RESERVED_COLUMNS = frozenset({WEIGHT, WEIGHT_SUM})


def quote(identifier: str) -> str:
    """``identifier`` as a Spark SQL quoted identifier."""
    return "`" + identifier.replace("`", "``") + "`"


def sql_string(text: str) -> str:
    """``text`` as a Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


#: The prefix of the error a statement raises when a check inside it fails (:func:`failed_check`).
ENGINE_CHECK = "dyntable delta check"


def failed_check(code: str, as_type: Optional[str] = None) -> str:
    """SQL that fails its statement with the check ``code``; ``as_type`` where it stands for a
    value (Sail types every branch of a CASE, and every clause of a MERGE, taken or not)."""
    failing = f"raise_error({sql_string(f'{ENGINE_CHECK} {code}')})"
    return f"CAST({failing} AS {as_type})" if as_type else failing


def relation_name(schema: Optional[str], identifier: str) -> str:
    """The canonical name of the table ``identifier`` in ``schema``: ``schema.table`` in lower
    case (just ``table`` without a schema)."""
    return f"{schema}.{identifier}".lower() if schema else identifier.lower()


def table_name(table: Union[str, exp.Table], default_schema: Optional[str] = None) -> str:
    """The canonical name (:func:`relation_name`) of a table given as SQL text, quoted or not, or
    parsed; ``default_schema`` qualifies a bare table name."""
    parsed = exp.to_table(table, dialect=DIALECT) if isinstance(table, str) else table
    parts = [part.name for part in parsed.parts]
    return relation_name(".".join(parts[:-1]) or default_schema, parts[-1])


def quoted_table(name: str) -> str:
    """A canonical (or any dotted) table name as quoted SQL text: ``` `schema`.`table` ```."""
    return ".".join(quote(part.name) for part in exp.to_table(name, dialect=DIALECT).parts)


def null_safe_match(columns: Sequence[str], left: str, right: str) -> str:
    """``left.c <=> right.c AND ...`` over ``columns`` (TRUE when there are none)."""
    return " AND ".join(f"{left}.{quote(c)} <=> {right}.{quote(c)}" for c in columns) or "TRUE"


def fingerprint(content: Union[str, bytes]) -> str:
    """16 hex digits of the SHA-256 of ``content``."""
    return hashlib.sha256(content.encode() if isinstance(content, str) else content).hexdigest()[:16]


def first_line(error: BaseException) -> str:
    """``error``'s first non-blank line (its type's name when it has no message)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def consolidate(delta: str, columns: Sequence[str], *, positive: bool = False) -> str:
    """The Z-set ``delta`` with at most one row per distinct tuple, weights summed, zeros dropped.
    ``positive`` deltas cannot cancel, so they skip the filter.

    >>> import textwrap
    >>> print(textwrap.fill(consolidate("SELECT * FROM d", ["a"]), 90))
    SELECT `a`, CAST(`_dyn_sum` AS BIGINT) AS `_dyn_weight` FROM (SELECT `a`,
    SUM(`_dyn_weight`) AS `_dyn_sum` FROM (SELECT * FROM d) AS `_dyn_c` GROUP BY `a`) AS
    `_dyn_g` WHERE `_dyn_sum` <> 0
    """
    listed = ", ".join(quote(c) for c in columns)
    summed = quote(WEIGHT_SUM)
    nonzero = "" if positive else f" WHERE {summed} <> 0"
    return (
        f"SELECT {listed}, CAST({summed} AS BIGINT) AS {quote(WEIGHT)} FROM (SELECT {listed}, "
        f"SUM({quote(WEIGHT)}) AS {summed} FROM ({delta}) AS `_dyn_c` GROUP BY {listed}) AS `_dyn_g`"
        f"{nonzero}"
    )
