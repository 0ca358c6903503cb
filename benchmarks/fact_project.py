"""A dbt project over data.py's fact, and the ingest job that appends to the fact between runs.

The fact, customers and products are the project's sources; its models are the benchmark's. On
the embedded engine the fact is loaded into the warehouse before the first `dbt run`; on JVM Spark
by the project's own macro (`dbt run-operation load_bench`), so its catalog knows the tables.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Optional

from benchmarks.data import SCHEMA, Fact, fact_arrow
from benchmarks.dbt_project import DbtProject

PROJECT = "user_cost"
DT_SCHEMA = "analytics"


def with_sources(sql: str) -> str:
    """data.py's queries with their tables read as dbt sources."""
    return re.sub(rf"\b{SCHEMA}\.(fact|customers|products)\b", r"{{ source('%s', '\1') }}" % SCHEMA, sql)


class StatementRecorder:
    """Stands in for an engine to collect the statements data.Fact.load runs."""

    def __init__(self) -> None:
        self.statements: List[str] = []

    def execute(self, statement: str) -> "StatementRecorder":
        self.statements.append(statement)
        return self

    def collect(self) -> List[Any]:
        return []


def load_macro(rows: int) -> str:
    """A macro running data.Fact.load's statements for ``rows`` fact rows: `load_bench`."""
    recorder = StatementRecorder()
    Fact(recorder).load(rows)
    calls = "\n".join(
        f"  {{% call statement('load_{i}') %}}{s}{{% endcall %}}" for i, s in enumerate(recorder.statements)
    )
    return f"{{% macro load_bench() %}}\n{calls}\n{{% endmacro %}}\n"


class FactProject(DbtProject):
    """``models`` (name → SQL) over the fact of ``rows`` rows as sources, in a temp folder with its
    warehouse inside it; ``engine`` "embedded" or "jvm" (`method: session` with ``spark_jars``)."""

    def __init__(
        self, root: Path, engine: str, rows: int, spark_jars: Optional[Path], models: Dict[str, str]
    ) -> None:
        super().__init__(root, PROJECT, engine, str(root / "warehouse"))
        self.engine, self.rows, self.models = engine, rows, models
        output: Dict[str, Any] = {
            "type": "dyntable",
            "schema": DT_SCHEMA,
            "warehouse": self.warehouse_url,
            "threads": 1,
        }
        if engine == "jvm":
            # Spark's event log counts the jobs each model starts: each costs a fixed amount there.
            self.events.mkdir(parents=True)
            output.update(
                method="session",
                spark_jars=str(spark_jars),
                server_side_parameters={
                    "spark.eventLog.enabled": "true",
                    "spark.eventLog.dir": self.events.as_uri(),
                    "spark.eventLog.compress": "false",
                },
            )
        tables = "".join(f"      - name: {t}\n" for t in ("fact", "customers", "products"))
        files = {
            "models/sources.yml": f"version: 2\nsources:\n  - name: {SCHEMA}\n    tables:\n{tables}",
            **{f"models/{model}.sql": sql for model, sql in models.items()},
            "macros/load_bench.sql": load_macro(rows),
        }
        self.write(output, files, f"models:\n  {PROJECT}:\n    +file_format: delta\n")

    @property
    def events(self) -> Path:
        """JVM Spark's event logs."""
        return self.root / "spark-events"

    @property
    def dynamic_tables(self) -> List[str]:
        return [m for m in self.models if m.startswith("dt_")]

    def fact_location(self) -> Path:
        # The embedded engine keeps <schema>/<table>; JVM Spark's catalog <schema>.db/<table>.
        for candidate in (self.warehouse / SCHEMA / "fact", self.warehouse / f"{SCHEMA}.db" / "fact"):
            if (candidate / "_delta_log").is_dir():
                return candidate
        raise RuntimeError(f"no fact table under {self.warehouse}")

    def load_embedded(self) -> None:
        """The fact loaded into the warehouse by the embedded engine, before the first `dbt run`."""
        from dbt.adapters.dyntable.engines.embedded import EmbeddedEngine

        engine = EmbeddedEngine(self.warehouse).start()
        try:
            Fact(engine).load(self.rows)
        finally:
            engine.stop()

    def job_starts(self, since: datetime) -> List[datetime]:
        """When each Spark job started, from the event logs of the applications since ``since``."""
        import json

        starts = []
        # Spark 4 rolls event logs: a folder per application, holding its event files.
        for log in self.events.rglob("*"):
            if not log.is_file() or datetime.fromtimestamp(log.stat().st_mtime, timezone.utc) < since:
                continue
            for line in log.read_text(errors="replace").splitlines():
                if '"SparkListenerJobStart"' in line:
                    event = json.loads(line)
                    starts.append(datetime.fromtimestamp(event["Submission Time"] / 1000, timezone.utc))
        return starts


class FactWriter:
    """Appends to the fact with the `deltalake` package: an ingest job outside the measured process."""

    def __init__(self, location: Path, next_id: int) -> None:
        from deltalake import DeltaTable

        self.location, self.next_id = location, next_id
        # The load's smallest file: compacting to it merges what was appended since and leaves the
        # load's files, and the scan parallelism they give, as they were.
        sizes = DeltaTable(str(location)).get_add_actions(flatten=True).column("size_bytes")
        self.loaded_file_bytes: int = min(sizes.to_pylist())

    def insert(self, count: int) -> None:
        from deltalake import write_deltalake

        write_deltalake(str(self.location), fact_arrow(self.next_id, self.next_id + count), mode="append")
        self.next_id += count
