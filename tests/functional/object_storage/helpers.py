"""A small dbt project whose warehouse is in the S3 test server."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

import pyarrow as pa
import yaml
from dbt.cli.main import dbtRunner

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.connections import EngineRegistry
from dbt.adapters.dyntable.dynamic_table.metadata import HistoryRow, MetadataStore
from dbt.adapters.dyntable.dynamic_table.verify import check_dvs
from dbt.adapters.dyntable.engines.base import Engine
from dbt.adapters.dyntable.testing.s3_server import S3Server
from tests.functional.profiles import credentials

BIN = Path(sys.executable).parent


@dataclass
class S3Project:
    root: Path
    server: S3Server
    warehouse: str
    schema: str = "app"
    storage_options: Optional[Dict[str, str]] = None

    def __post_init__(self) -> None:
        (self.root / "models").mkdir(parents=True, exist_ok=True)
        (self.root / "seeds").mkdir(exist_ok=True)
        (self.root / "dbt_project.yml").write_text(
            "name: s3_project\nversion: '1.0'\nconfig-version: 2\nprofile: s3_project\n"
            "seeds:\n  +file_format: delta\nmodels:\n  +file_format: delta\n"
            "snapshots:\n  +file_format: delta\n"
        )
        (self.root / "profiles.yml").write_text(
            yaml.safe_dump({"s3_project": {"target": "dev", "outputs": {"dev": self.target}}})
        )

    @property
    def target(self) -> Dict[str, Any]:
        return {
            "type": "dyntable",
            "schema": self.schema,
            "threads": 1,
            "warehouse": self.warehouse,
            "storage_options": self.storage_options or self.server.storage_options(),
        }

    def write(self, path: str, text: str) -> None:
        (self.root / path).parent.mkdir(parents=True, exist_ok=True)
        (self.root / path).write_text(text)

    def over_source(self, table: str, rows: pa.Table, model: str, sql: str) -> "S3Project":
        """Declare ``raw.<table>`` a dbt source, write ``rows`` to it and add ``model`` (its SQL)."""
        self.write(
            "models/sources.yml",
            f"version: 2\nsources:\n  - name: raw\n    schema: raw\n    tables:\n      - name: {table}\n",
        )
        self.write(f"models/{model}.sql", sql)
        self.write_source(table, rows)
        return self

    def source(self, table: str) -> str:
        return f"{self.warehouse}/raw/{table}"

    def write_source(self, table: str, rows: pa.Table, mode: str = "append", **kwargs: Any) -> None:
        """Another tool writes a source: the `deltalake` package, with its own settings."""
        from deltalake import write_deltalake

        write_deltalake(self.source(table), rows, mode=mode, storage_options=self.server_options(), **kwargs)

    def server_options(self) -> Dict[str, str]:
        return {
            **self.server.storage_options(),
            **{k.lower().removeprefix("aws_"): v for k, v in self.server.credentials().items()},
        }

    def dbt(self, *args: str) -> Any:
        """dbt in this process (the adapter's engine on this warehouse is kept between calls)."""
        result = dbtRunner().invoke(
            [*args, "--project-dir", str(self.root), "--profiles-dir", str(self.root)]
        )
        assert result.success, f"dbt {' '.join(args)} failed: {result.exception}"
        return result

    def run(
        self, *command: str, env: Optional[Dict[str, str]] = None, check: bool = True
    ) -> subprocess.CompletedProcess:
        """A command in a process of its own, with the environment a user sets (credentials)."""
        environment = {**os.environ, **self.server.credentials(), **(env or {})}
        done = subprocess.run(
            list(command), cwd=self.root, env=environment, capture_output=True, text=True, timeout=600
        )
        assert not check or done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
        return done

    def dyntable(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess:
        return self.run(
            str(BIN / "dyntable"),
            *args,
            "--project-dir",
            str(self.root),
            "--profiles-dir",
            str(self.root),
            **kwargs,
        )

    def engine(self) -> Engine:
        return EngineRegistry.get(credentials(self.target), self.root).engine

    def store(self) -> MetadataStore:
        storage.warehouse_storage(self.warehouse, self.target["storage_options"])  # this process's settings
        return MetadataStore(f"{self.warehouse}/dyntable_meta", "dyntable_meta")

    def assert_matches(self, *models: str) -> None:
        """Each DT equals its query at its data timestamp, as a multiset."""
        engine, store = self.engine(), self.store()
        engine.forget_catalog()
        for model in models:
            check = check_dvs(engine, store, f"{self.schema}.{model}")
            assert check.ok, f"{model}: {check.detail}"

    def history(self, model: str) -> List[HistoryRow]:
        return self.store().history(f"{self.schema}.{model}")

    def last_action(self, model: str) -> str:
        row = self.history(model)[-1]
        return str(row.refresh_action.value if row.refresh_action else None)
