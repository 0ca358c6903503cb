"""One dynamic-table service per metadata schema in a process, however many of dbt's threads ask."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, List

from dbt.adapters.dyntable.connections import DyntableCredentials, Environment


class SlowCatalog:
    """Stands in for an engine whose catalog takes a while to register the metadata tables (a
    cluster): the window in which a second thread would build a second service."""

    def __init__(self) -> None:
        self.statements: List[str] = []

    def execute(self, statement: str) -> Any:
        time.sleep(0.02)
        self.statements.append(statement)

    def engine_location(self, location: str) -> str:
        return location


def test_threads_asking_at_once_share_one_service(tmp_path: Path) -> None:
    environment = Environment(SlowCatalog(), tmp_path)  # type: ignore[arg-type]
    creds = DyntableCredentials(schema="app", warehouse=str(tmp_path))
    services: List[object] = []
    barrier = threading.Barrier(4)

    def ask() -> None:
        barrier.wait()
        services.append(environment.service(creds))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(services) == 4
    assert len({id(service) for service in services}) == 1
    assert list(environment.services) == [creds.metadata_schema]
