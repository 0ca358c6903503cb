"""The warehouse directory: where every engine keeps its tables, in one layout.

    <warehouse>/<schema>/<table>/_delta_log/...     a Delta table
    <warehouse>/<schema>/.views/<view>.sql          a view's CREATE statement (embedded engine)

The warehouse is a local folder or a prefix in an object store (:mod:`..storage`).

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
import re
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import AbstractSet, Dict, Iterator, List, Optional, Set, Tuple, Union

import sqlglot
from pyspark.sql import SparkSession
from sqlglot import exp

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.engines.base import EngineError
from dbt.adapters.dyntable.storage import Storage
from dbt.adapters.dyntable.vocabulary import DIALECT, first_line, quote, sql_string

logger = logging.getLogger(__name__)

VIEWS_DIR = ".views"
#: Tables of an object-store warehouse whose logs are read at once when the engine starts.
ATTACH_THREADS = 8
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


def with_location(create: exp.Create, location: str) -> str:
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
    location: Union[str, Path]

    def create_statement(self, location: Optional[str] = None) -> str:
        """`CREATE TABLE ... LOCATION` without a column list: Sail then reads the schema from the
        Delta log at every scan, so a table whose schema another writer changed (a column added,
        dropped or renamed by deltalake or another Spark) stays readable and writable, where a
        declared list kept the old columns ("not available in Delta file scan schema"). Such a
        table lists no columns in the session's catalog; the adapter lists them from its Delta log
        (docs/ARCHITECTURE.md, "Engines"). ``location``: as the engine names it, where that
        differs (JVM Spark's ``s3a://``)."""
        partitions = storage.delta_table(str(self.location)).metadata().partition_columns
        partitioned = f" PARTITIONED BY ({', '.join(quote(c) for c in partitions)})" if partitions else ""
        return (
            f"CREATE TABLE IF NOT EXISTS {quote(self.schema)}.{quote(self.name)} "
            f"USING delta{partitioned} LOCATION {sql_string(str(location or self.location))}"
        )


class Warehouse:
    """The layout of the engines' tables and views, in a local folder or an object store
    (:mod:`..storage`)."""

    def __init__(self, root: Union[str, Path, Storage]) -> None:
        self.storage = root if isinstance(root, Storage) else storage.warehouse_storage(str(root))
        #: The warehouse's location: an absolute local path, or a URL.
        self.root = self.storage.root

    @property
    def remote(self) -> bool:
        return self.storage.remote

    def ensure_writable(self) -> None:
        """Create the directory and prove a file can be written there."""
        probe = self.storage.join(f".write-check-{uuid.uuid4().hex}")
        try:
            self.storage.make_folder(self.root)
            self.storage.write(probe, b"ok")
            self.storage.delete(probe)
        except OSError as exc:
            raise EngineError(
                f"The engine cannot write to its warehouse directory {self.root} "
                f"({exc.strerror or exc}). Set `warehouse` in your profile to a writable directory."
            ) from exc
        except Exception as exc:  # noqa: BLE001 - an object store's client raises its own errors
            raise EngineError(
                f"The engine cannot write to its warehouse {self.root}: {first_line(exc)}. Check the "
                "bucket, the credentials the environment gives (AWS_ACCESS_KEY_ID, AWS_PROFILE, an "
                "instance role, ...) and `storage_options` (endpoint, region) in your profile."
            ) from exc

    def schema_path(self, schema: str) -> str:
        return self.storage.join(schema.lower())

    def table_location(self, schema: str, name: str) -> str:
        return self.storage.join(schema.lower(), name.lower())

    def contains(self, location: str) -> bool:
        return self.storage.contains(str(location))

    def schemas(self) -> List[str]:
        # A folder holding a Delta log is a table, not a schema: JVM Spark keeps the tables of
        # the `default` schema directly in the warehouse.
        return sorted(
            name
            for name in self.storage.folders(self.root)
            if not name.startswith(".") and DELTA_LOG not in self.storage.folders(self.storage.join(name))
        )

    def tables(self, schema: str) -> Iterator[PersistedTable]:
        for name in self.storage.folders(self.schema_path(schema)):
            location = self.storage.join(schema.lower(), name)
            if not name.startswith(".") and self.storage.is_table(location):
                yield PersistedTable(schema, name, location)

    def _create_statements(self, schema: str) -> List[Tuple[PersistedTable, Union[str, Exception]]]:
        """Each table of ``schema`` and the statement registering it (or why it cannot be made):
        in an object store, where each table's log costs requests, read side by side."""

        def statement(table: PersistedTable) -> Union[str, Exception]:
            try:
                return table.create_statement()
            except Exception as exc:  # noqa: BLE001 - reported by attach, per table
                return exc

        tables = list(self.tables(schema))
        if not self.remote or len(tables) < 2:
            return [(table, statement(table)) for table in tables]
        with ThreadPoolExecutor(ATTACH_THREADS) as pool:
            return list(zip(tables, pool.map(statement, tables)))

    def views(self, schema: str) -> List[Tuple[str, str]]:
        folder = self.storage.join(schema.lower(), VIEWS_DIR)
        found = []
        for listed in self.storage.files(folder):
            if listed.name.endswith(".sql"):
                text = self.storage.read(f"{folder}/{listed.name}")
                if text is not None:
                    found.append((listed.name[: -len(".sql")], text.decode()))
        return found

    def names(self) -> Set[str]:
        """Every schema, table and view name the warehouse holds (lower case, as stored)."""
        found: Set[str] = set()
        for schema in self.schemas():
            found.add(schema)
            found.update(n for n in self.storage.folders(self.schema_path(schema)) if not n.startswith("."))
            views = self.storage.files(self.storage.join(schema, VIEWS_DIR))
            found.update(f.name[: -len(".sql")] for f in views if f.name.endswith(".sql"))
        return found

    def view_names(self, schema: str) -> Set[str]:
        """The names of the views saved in ``schema`` (lower case)."""
        listed = self.storage.files(self.storage.join(schema.lower(), VIEWS_DIR))
        return {f.name[: -len(".sql")] for f in listed if f.name.endswith(".sql")}

    def view_statement(self, schema: str, name: str) -> Optional[str]:
        text = self.storage.read(self.storage.join(schema.lower(), VIEWS_DIR, f"{name.lower()}.sql"))
        return text.decode() if text is not None else None

    # -- bookkeeping after DDL -------------------------------------------------------------------

    def create_schema(self, schema: str) -> None:
        self.storage.make_folder(self.schema_path(schema))

    def save_view(self, schema: str, name: str, statement: str) -> None:
        # Written whole (a local file through a rename), so a crash never leaves half a view.
        self.storage.write(
            self.storage.join(schema.lower(), VIEWS_DIR, f"{name.lower()}.sql"), statement.encode()
        )

    def drop_view(self, schema: str, name: str) -> None:
        self.storage.delete(self.storage.join(schema.lower(), VIEWS_DIR, f"{name.lower()}.sql"))

    def drop_table(self, location: str) -> None:
        """Delete a dropped table's files: Sail leaves them, and a later table at the same
        location would otherwise inherit the old history."""
        if self.contains(location):
            self.storage.delete_tree(storage.normalized(str(location)))

    def drop_schema(self, schema: str) -> None:
        self.storage.delete_tree(self.schema_path(schema))

    # -- start-up --------------------------------------------------------------------------------

    def attach(self, spark: SparkSession) -> AttachReport:
        """Re-create the catalog of a fresh session from what is persisted."""
        report = AttachReport()
        pending_views: List[Tuple[str, str, str]] = []
        for schema in self.schemas():
            spark.sql(f"CREATE SCHEMA IF NOT EXISTS {quote(schema)}")
            for table, statement in self._create_statements(schema):
                try:
                    if isinstance(statement, Exception):
                        raise statement
                    spark.sql(statement)
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
