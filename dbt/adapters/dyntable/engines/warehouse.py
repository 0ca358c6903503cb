"""The warehouse directory: where every engine keeps its tables, in one layout.

    <warehouse>/<schema>/<table>/_delta_log/...     a Delta table
    <warehouse>/<schema>/.views/<view>.sql          a view's CREATE statement (embedded engine)

Sail keeps its catalog in memory per Spark Connect session, so whatever a dbt invocation creates
must be found again by the next process: :meth:`Warehouse.attach` re-creates the embedded engine's
catalog entries from the directory when it starts. The JVM engine keeps its catalog in a metastore,
gives every schema its folder here (Spark would pick ``<schema>.db``), and registers the Delta
tables it finds here that its catalog does not know (tables written outside Spark, e.g. with the
`deltalake` package), so both engines see the same tables at the same places.
Identifiers are stored lower-cased because Spark resolves them case-insensitively; Sail's catalog
does not, so the embedded engine hands it every schema, table and view name in lower case
(:func:`canonical_names`).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import AbstractSet, Dict, Iterator, List, Optional, Set, Tuple, Union

import sqlglot
from deltalake import DeltaTable
from pyspark.sql import SparkSession
from sqlglot import exp

from dbt.adapters.dyntable.engines.base import EngineError
from dbt.adapters.dyntable.vocabulary import DIALECT, first_line, quote, sql_string

logger = logging.getLogger(__name__)

VIEWS_DIR = ".views"
DELTA_LOG = "_delta_log"
DDL_PREFIXES = ("create", "drop")


def _head(statement: str) -> str:
    """``statement`` in lower case from its first word on, past leading comments."""
    head = statement.lstrip().lower()
    while head.startswith("--") or head.startswith("/*"):
        end = head.find("\n") + 1 if head.startswith("--") else head.find("*/") + 2
        head = head[end:].lstrip() if end > 1 else ""
    return head


def parse_ddl(statement: str) -> Optional[Union[exp.Create, exp.Drop]]:
    """A CREATE or DROP statement parsed, for the engines that adapt DDL; None for anything else
    (or DDL sqlglot does not understand, which then runs as written)."""
    if not _head(statement).startswith(DDL_PREFIXES):
        return None
    try:
        parsed = sqlglot.parse_one(statement, read=DIALECT)
    except sqlglot.errors.ParseError:
        logger.debug("dyntable: DDL not understood, run as written: %s", statement[:200])
        return None
    return parsed if isinstance(parsed, (exp.Create, exp.Drop)) else None


#: A token of a statement: a string literal, a comment, a quoted identifier or a word.
_TOKEN = re.compile(
    r"'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\"|--[^\n]*|/\*.*?\*/|`(?:[^`]|``)*`|[A-Za-z_]\w*", re.S
)
#: Statements whose table references sqlglot parses (others it keeps as a command, e.g. SHOW).
_PARSED_HEADS = frozenset(
    "select with insert merge update delete create drop alter describe desc use cache uncache "
    "refresh analyze truncate comment".split()
)


def _name_of(token: str) -> str:
    return token[1:-1].replace("``", "`") if token.startswith("`") else token


def canonical_names(statement: str, known: AbstractSet[str]) -> str:
    """``statement`` with every schema, table and view it names in lower case, as the warehouse
    stores them: Spark resolves these names case-insensitively, Sail's catalog only as spelled
    (docs/ARCHITECTURE.md, "Engines"). Only a statement spelling a ``known`` name (lower case) in
    another case is parsed, and only those names change: a column keeps its spelling."""
    spelled = [
        m
        for m in _TOKEN.finditer(statement)
        if m.group()[0] not in "'\"-/"
        and _name_of(m.group()) != _name_of(m.group()).lower()
        and _name_of(m.group()).lower() in known
    ]
    if not spelled:
        return statement
    head = _head(statement)
    parsed = None
    if head.startswith("(") or (head.split(None, 1) or [""])[0] in _PARSED_HEADS:
        try:
            parsed = sqlglot.parse_one(statement, read=DIALECT)
        except sqlglot.errors.ParseError:
            parsed = None
    if parsed is None or isinstance(parsed, exp.Command):
        # A command (SHOW, DESCRIBE DETAIL, OPTIMIZE, ...) names no columns: its known names go.
        return _lowered(statement, [(m.start(), m.end()) for m in spelled])
    return lowered_names(statement, parsed)


def lowered_names(statement: str, parsed: exp.Expr) -> str:
    """``statement`` (parsed as ``parsed``) with the schema, table and view names it references
    in lower case; CTE names and paths (``delta.`/path```) are left as they are."""
    ctes = {cte.alias_or_name.lower() for cte in parsed.find_all(exp.CTE)}
    spans = []
    for table in parsed.find_all(exp.Table):
        if not table.args.get("db") and table.name.lower() in ctes:
            continue
        for part in (table.args.get(key) for key in ("catalog", "db", "this")):
            if not isinstance(part, exp.Identifier) or part.name == part.name.lower() or "/" in part.name:
                continue
            start, end = part.meta.get("start"), part.meta.get("end")
            if start is not None and end is not None:
                spans.append((start, end + 1))
    return _lowered(statement, spans)


def _lowered(statement: str, spans: List[Tuple[int, int]]) -> str:
    text = statement
    for start, end in sorted(set(spans), reverse=True):
        text = text[:start] + text[start:end].lower() + text[end:]
    return text


def ddl_kind(ddl: exp.Expression) -> str:
    """TABLE, VIEW, SCHEMA, DATABASE, ... of a parsed CREATE or DROP."""
    return str(ddl.args.get("kind") or "").upper()


def with_location(create: exp.Create, location: Path) -> str:
    """``create`` with a LOCATION clause added, as Spark SQL."""
    create = create.copy()
    props = create.args.get("properties") or exp.Properties(expressions=[])
    props.append("expressions", exp.LocationProperty(this=exp.Literal.string(str(location))))
    create.set("properties", props)
    return create.sql(dialect=DIALECT)


@dataclass(frozen=True)
class PersistedTable:
    schema: str
    name: str
    location: Path

    def create_statement(self) -> str:
        """`CREATE TABLE ... LOCATION` without a column list: Sail then reads the schema from the
        Delta log at every scan, so a table whose schema another writer changed (a column added,
        dropped or renamed by deltalake or another Spark) stays readable and writable, where a
        declared list kept the old columns ("not available in Delta file scan schema"). Such a
        table lists no columns in the session's catalog; the adapter lists them from its Delta log
        (docs/ARCHITECTURE.md, "Engines")."""
        partitions = DeltaTable(str(self.location)).metadata().partition_columns
        partitioned = f" PARTITIONED BY ({', '.join(quote(c) for c in partitions)})" if partitions else ""
        return (
            f"CREATE TABLE IF NOT EXISTS {quote(self.schema)}.{quote(self.name)} "
            f"USING delta{partitioned} LOCATION {sql_string(str(self.location))}"
        )


class Warehouse:
    """The directory layout of the embedded engine's tables and views."""

    def __init__(self, root: Path) -> None:
        self.root = root.expanduser().resolve()

    def ensure_writable(self) -> None:
        """Create the directory and prove a file can be written there."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            probe = self.root / f".write-check-{uuid.uuid4().hex}"
            probe.write_text("ok")
            probe.unlink()
        except OSError as exc:
            raise EngineError(
                f"The embedded engine cannot write to its warehouse directory {self.root} "
                f"({exc.strerror or exc}). Set `warehouse` in your profile to a writable directory."
            ) from exc

    def schema_path(self, schema: str) -> Path:
        return self.root / schema.lower()

    def table_location(self, schema: str, name: str) -> Path:
        return self.schema_path(schema) / name.lower()

    def contains(self, path: Path) -> bool:
        return self.root in path.resolve().parents

    def schemas(self) -> List[str]:
        if not self.root.is_dir():
            return []
        # A folder holding a Delta log is a table, not a schema: JVM Spark keeps the tables of
        # the `default` schema directly in the warehouse.
        return sorted(
            p.name
            for p in self.root.iterdir()
            if p.is_dir() and not p.name.startswith(".") and not (p / DELTA_LOG).is_dir()
        )

    def tables(self, schema: str) -> Iterator[PersistedTable]:
        for path in sorted(self.schema_path(schema).iterdir()):
            if path.is_dir() and (path / DELTA_LOG).is_dir() and any((path / DELTA_LOG).glob("*.json")):
                yield PersistedTable(schema, path.name, path)

    def views(self, schema: str) -> List[Tuple[str, str]]:
        folder = self.schema_path(schema) / VIEWS_DIR
        if not folder.is_dir():
            return []
        return [(p.stem, p.read_text()) for p in sorted(folder.glob("*.sql"))]

    def names(self) -> Set[str]:
        """Every schema, table and view name the warehouse holds (lower case, as stored)."""
        found: Set[str] = set()
        for schema in self.schemas():
            found.add(schema)
            for path in self.schema_path(schema).iterdir():
                if path.is_dir() and not path.name.startswith("."):
                    found.add(path.name)
            found.update(p.stem for p in (self.schema_path(schema) / VIEWS_DIR).glob("*.sql"))
        return found

    def view_statement(self, schema: str, name: str) -> Optional[str]:
        path = self.schema_path(schema) / VIEWS_DIR / f"{name.lower()}.sql"
        return path.read_text() if path.is_file() else None

    # -- bookkeeping after DDL -------------------------------------------------------------------

    def create_schema(self, schema: str) -> None:
        self.schema_path(schema).mkdir(parents=True, exist_ok=True)

    def save_view(self, schema: str, name: str, statement: str) -> None:
        folder = self.schema_path(schema) / VIEWS_DIR
        folder.mkdir(parents=True, exist_ok=True)
        # Write then rename, so a crash never leaves half a view definition behind.
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "w") as handle:
            handle.write(statement)
        os.replace(tmp, folder / f"{name.lower()}.sql")

    def drop_view(self, schema: str, name: str) -> None:
        (self.schema_path(schema) / VIEWS_DIR / f"{name.lower()}.sql").unlink(missing_ok=True)

    def drop_table(self, location: Path) -> None:
        """Delete a dropped table's files: Sail leaves them, and a later table at the same
        location would otherwise inherit the old history."""
        if self.contains(location):
            shutil.rmtree(location, ignore_errors=True)

    def drop_schema(self, schema: str) -> None:
        shutil.rmtree(self.schema_path(schema), ignore_errors=True)

    # -- start-up --------------------------------------------------------------------------------

    def attach(self, spark: SparkSession) -> AttachReport:
        """Re-create the catalog of a fresh session from what is persisted."""
        report = AttachReport()
        pending_views: List[Tuple[str, str, str]] = []
        for schema in self.schemas():
            spark.sql(f"CREATE SCHEMA IF NOT EXISTS {quote(schema)}")
            for table in self.tables(schema):
                try:
                    spark.sql(table.create_statement())
                except Exception as exc:  # noqa: BLE001 - one damaged table must not stop the engine
                    report.broken_tables.append((f"{schema}.{table.name}", first_line(exc)))
                    continue
                report.tables += 1
            pending_views.extend((schema, name, stmt) for name, stmt in self.views(schema))
        # Views may read other views: create them in rounds until no more succeed.
        errors: Dict[Tuple[str, str], str] = {}
        while pending_views:
            failed = []
            for schema, name, statement in pending_views:
                try:
                    # Saved as written before views were named in lower case.
                    spark.sql(_lowered_ddl(statement))
                    report.views += 1
                except Exception as exc:  # noqa: BLE001 - reported below, never swallowed
                    errors[(schema, name)] = first_line(exc)
                    failed.append((schema, name, statement))
            if len(failed) == len(pending_views):
                break
            pending_views = failed
        else:
            failed = []
        report.broken_views = [(f"{s}.{n}", errors[(s, n)]) for s, n, _ in failed]
        return report


def _lowered_ddl(statement: str) -> str:
    ddl = parse_ddl(statement)
    return statement if ddl is None else lowered_names(statement, ddl)


@dataclass
class AttachReport:
    tables: int = 0
    views: int = 0
    broken_views: Optional[List[Tuple[str, str]]] = None
    broken_tables: List[Tuple[str, str]] = field(default_factory=list)
    """Tables whose log or files cannot be read (damaged), with why: left out of the catalog."""
