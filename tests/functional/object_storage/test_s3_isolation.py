"""The embedded engine's server stays unreachable from other processes when its warehouse is in an
object store: it reaches the store through its egress process (engines/isolated.py;
docs/ARCHITECTURE.md, "Who may use the embedded engine")."""

from __future__ import annotations

import time
from pathlib import Path
from typing import List

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.engines.embedded import EmbeddedEngine
from dbt.adapters.dyntable.engines.isolated import IsolatedServer
from dbt.adapters.dyntable.testing.s3_server import S3Server
from tests.functional.engine_probe import probe_from_another_process


def _processes_of(folder: str) -> List[int]:
    """The processes started for the server in ``folder`` (the child and its egress process)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # not a process, or one that ended meanwhile
            continue
        if folder.encode() in command:
            found.append(int(entry.name))
    return found


def test_an_object_store_warehouse_keeps_the_server_isolated(s3: S3Server, s3_warehouse: str) -> None:
    engine = EmbeddedEngine(storage.warehouse_storage(s3_warehouse, s3.storage_options())).start()
    try:
        server = engine._server
        assert isinstance(server, IsolatedServer), f"the server runs unisolated at {engine.address}"
        assert len(_processes_of(server.folder)) == 2  # the child in its namespaces, its egress
        s3.reset()
        engine.execute("CREATE TABLE kept (a INT) USING delta")
        engine.execute("INSERT INTO kept VALUES (1), (2)")
        assert sorted(row.a for row in engine.spark.sql("SELECT a FROM kept").collect()) == [1, 2]
        served = s3.requests()
        assert served.get("PUT", 0) >= 2 and served.get("GET", 0) >= 1, served  # the log, the data
        location = str(engine.table_location("default", "kept"))
        assert location.startswith("s3://"), location
        said = probe_from_another_process(server, engine.port, location)
        assert len(said) == 3 and all(line.startswith("refused") for line in said), said
        assert sorted(row.a for row in engine.spark.sql("SELECT a FROM kept").collect()) == [1, 2]
    finally:
        engine.stop()
    # The egress process is killed as its parent ends (PR_SET_PDEATHSIG), a moment after.
    deadline = time.monotonic() + 10
    while _processes_of(server.folder) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_of(server.folder) == []
