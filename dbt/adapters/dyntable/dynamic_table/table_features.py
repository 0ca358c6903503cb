"""A DT's Delta table features beyond its rows: liquid clustering, comments and grants
(docs/ARCHITECTURE.md, "Table features").

What an engine offers here depends on more than the engine: JVM Spark clusters with delta-spark 3.1
or later, grants need a catalog that has them, and a Spark Connect server has whatever it was
started with. So a feature is asked of the running engine, once per process: a statement it cannot
parse or plan is a feature it lacks. A DT asking for a feature its engine lacks gets a warning
naming the engine and quoting it, never an error: a project runs on either engine.
"""

from __future__ import annotations

import threading
from typing import Dict, List, Optional, Sequence, Set, Tuple
from weakref import WeakKeyDictionary

from dbt.adapters.dyntable.delta_log import DELETION_VECTORS, DeltaLog
from dbt.adapters.dyntable.dynamic_table.changeset import TABLE_COMMENT, Clustering, Comments
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.engines.base import Engine
from dbt.adapters.dyntable.vocabulary import first_line, quote, sql_string

#: What Spark's EXPLAIN prints, as a row, for a statement it parses but cannot plan.
PLANNING_ERROR = "Error occurred during query planning"

_lock = threading.Lock()
#: Per engine: each feature asked, and the engine's refusal (None: it has the feature).
_refusals: "WeakKeyDictionary[Engine, Dict[str, Optional[str]]]" = WeakKeyDictionary()
#: Per engine: the (table, feature) pairs already warned about in this process.
_warned: "WeakKeyDictionary[Engine, Set[Tuple[str, str]]]" = WeakKeyDictionary()


def refusal(engine: Engine, feature: str, statement: str) -> Optional[str]:
    """Why ``engine`` refuses ``statement`` (its words), or None when it runs it; asked once per
    engine and ``feature``. Callers pass a statement without effects (EXPLAIN, SHOW)."""
    with _lock:
        known = _refusals.setdefault(engine, {})
        if feature in known:
            return known[feature]
    try:
        lines = [str(value) for row in engine.execute(statement).collect() for value in row]
        text = "\n".join(lines).splitlines()
        failed = next((i for i, line in enumerate(text) if line.startswith(PLANNING_ERROR)), None)
        said = None if failed is None else " ".join(text[failed : failed + 2]).strip()
    except Exception as exc:  # noqa: BLE001 - any refusal means the feature is missing
        said = first_line(exc)
    with _lock:
        _refusals.setdefault(engine, {})[feature] = said
    return said


def once(engine: Engine, table: str, feature: str, warning: str) -> List[str]:
    """``[warning]`` the first time this process warns about ``feature`` of ``table``."""
    with _lock:
        warned = _warned.setdefault(engine, set())
        if (table, feature) in warned:
            return []
        warned.add((table, feature))
    return [warning]


def lacks(engine: Engine, construct: str, said: str) -> str:
    """How a warning names the engine that lacks ``construct``, in its own words."""
    return f"the {engine.name} engine has no {construct} (it said: {said})"


class TableFeatures:
    """Clustering and comments of one DT on one engine."""

    def __init__(self, engine: Engine, dt: DynamicTable) -> None:
        self.engine = engine
        self.dt = dt

    def describe(self, log: Optional[DeltaLog]) -> str:
        """The DT's partitioning, clustering and comments as its Delta log holds them, and the
        ``cluster_by`` its engine cannot apply (``dyntable explain`` prints it)."""
        config = self.dt.config
        if log is None:
            return "none yet (the table is not created)"
        snapshot = log.snapshot(log.latest_version())
        said: List[str] = []
        if snapshot.partition_columns:
            said.append(f"partitioned by ({', '.join(snapshot.partition_columns)})")
        if config.cluster_by:
            refused = self._clustering_refusal()
            if refused is not None:
                lacking = lacks(self.engine, "Delta liquid clustering (CLUSTER BY)", refused)
                said.append(f"cluster_by ({', '.join(config.cluster_by)}) not applied: {lacking}")
            elif "clustering" in snapshot.writer_features:
                said.append(f"clustered by ({', '.join(config.cluster_by)}) (Delta liquid clustering)")
        commented = [f.name for f in snapshot.schema.fields if f.metadata.get("comment")]
        if snapshot.description or commented:
            on = (["the table"] if snapshot.description else []) + (
                [f"{len(commented)} column{'s' if len(commented) != 1 else ''}"] if commented else []
            )
            said.append(f"comments on {' and '.join(on)}")
        return "; ".join(said) or "none (no partition_by, cluster_by or persisted docs)"

    # -- creating --------------------------------------------------------------------------------

    def column_comment(self, column: str) -> str:
        """`` COMMENT '...'`` for ``column`` in a CREATE TABLE, or nothing."""
        text = Comments.from_docs(self.dt.docs).wanted.get(column.lower())
        return f" COMMENT {sql_string(text)}" if text else ""

    def create_clauses(self) -> Tuple[str, List[str]]:
        """The CREATE TABLE clauses after ``USING delta``: partitioning, clustering and the table
        comment; and the warning when the engine cannot cluster."""
        dt = self.dt
        clauses = f" PARTITIONED BY ({_listed(dt.config.partition_by)})" if dt.config.partition_by else ""
        warnings: List[str] = []
        if dt.config.cluster_by:
            said = self._clustering_refusal()
            if said is None:
                clauses += f" CLUSTER BY ({_listed(dt.config.cluster_by)})"
            else:
                warnings = self._unclustered(said)
        if dt.docs.table:
            clauses += f" COMMENT {sql_string(dt.docs.table)}"
        if self.engine.capabilities.deletion_vectors:
            # Its readers then read the rows a refresh changes, not the files holding them
            # (docs/ARCHITECTURE.md, "Rewritten inputs").
            clauses += f" TBLPROPERTIES ({sql_string(DELETION_VECTORS)} = 'true')"
        return clauses, warnings

    # -- keeping them ----------------------------------------------------------------------------

    def align_clustering(self, log: DeltaLog) -> List[str]:
        """Cluster the DT by ``cluster_by`` where its engine can (a replace or a changed config
        leaves it clustered otherwise): a metadata-only commit, no row changes. Runs a statement
        only for a DT that is or should be clustered."""
        clustering = Clustering.from_config(self.dt.config)
        snapshot = log.snapshot(log.latest_version())
        if not clustering.wanted and "clustering" not in snapshot.writer_features:
            return []
        said = self._clustering_refusal()
        if said is not None:
            return self._unclustered(said) if clustering.wanted else []
        detail = self.engine.execute(f"DESCRIBE DETAIL {self.dt.relation}").collect()[0].asDict()
        if clustering.get_diff(Clustering.existing(detail.get("clusteringColumns") or ())) is None:
            return []
        target = f"({_listed(self.dt.config.cluster_by)})" if clustering.wanted else "NONE"
        self.engine.execute(f"ALTER TABLE {self.dt.relation} CLUSTER BY {target}")
        return []

    def align_comments(self, log: DeltaLog) -> List[str]:
        """Write the comments ``persist_docs`` asks for that the DT's Delta log does not hold yet
        (read from the log: nothing runs when they are in place); a warning naming the engine
        when it cannot change them."""
        comments, snapshot = Comments.from_docs(self.dt.docs), log.snapshot(log.latest_version())
        existing = {f.name.lower(): f.metadata.get("comment") or "" for f in snapshot.schema.fields}
        existing[TABLE_COMMENT] = snapshot.description or ""
        missing = set(comments.missing(existing))
        statements = []
        if TABLE_COMMENT in missing:
            statements.append(
                f"COMMENT ON TABLE {self.dt.relation} IS {sql_string(comments.wanted[TABLE_COMMENT])}"
            )
        for column in snapshot.schema.fields:
            if column.name.lower() in missing:
                statements.append(
                    f"ALTER TABLE {self.dt.relation} ALTER COLUMN {quote(column.name)} "
                    f"COMMENT {sql_string(comments.wanted[column.name.lower()])}"
                )
        for statement in statements:
            try:
                self.engine.execute(statement)
            except Exception as exc:  # noqa: BLE001 - the engine's refusal becomes a warning
                said = lacks(self.engine, "statement changing comments", first_line(exc))
                return once(
                    self.engine,
                    self.dt.name,
                    "comments",
                    f"Model '{self.dt.model}': persist_docs could not update the comments of dynamic "
                    f"table {self.dt.name}: {said}. The comments are written when the table is "
                    "created; JVM Spark also updates them.",
                )
        return []

    def _clustering_refusal(self) -> Optional[str]:
        probe = f"CREATE TABLE {quote(self.dt.schema)}.`dyntable_probe` (c INT) USING delta CLUSTER BY (c)"
        return refusal(self.engine, "clustering", f"EXPLAIN {probe}")

    def _unclustered(self, said: str) -> List[str]:
        lacking = lacks(self.engine, "Delta liquid clustering (CLUSTER BY)", said)
        return once(
            self.engine,
            self.dt.name,
            "clustering",
            f"Model '{self.dt.model}': cluster_by ({', '.join(self.dt.config.cluster_by)}) is not applied "
            f"to dynamic table {self.dt.name}: {lacking}. It stays unclustered there; JVM Spark with "
            "delta-spark 3.1 or later clusters it.",
        )


def grants_refusal(engine: Engine, relation: str) -> Optional[str]:
    """Why ``engine``'s catalog cannot apply grants (its words), or None when it can: it must
    answer dbt's first grant statement, ``SHOW GRANTS ON`` the relation."""
    return refusal(engine, "grants", f"SHOW GRANTS ON {relation}")


def _listed(columns: Sequence[str]) -> str:
    return ", ".join(quote(c) for c in columns)
