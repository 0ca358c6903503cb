"""A warehouse on object storage: one S3 API server (moto, on 127.0.0.1) for the test session.

The server requires credentials on every request, as a user's store does; the test process gets
them from the standard environment variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_REGION), as a user's would, and each project's profile gives the endpoint in
`storage_options`. Object storage is the embedded engine's here: JVM Spark would need the
`hadoop-aws` module, which no registry this project installs from has (docs/ARCHITECTURE.md,
"Object storage").

These tests run dbt in this process (``dbtRunner``) on warehouses of their own, beside the
session's engine that the other functional tests share; :func:`dbt_adapters_restored` keeps the
adapter such a run registers from serving the tests that come after.
"""

from __future__ import annotations

import os
import uuid
from typing import Dict, Iterator

import pytest
from dbt.adapters.factory import FACTORY

from dbt.adapters.dyntable.testing.s3_server import S3Server


@pytest.fixture(autouse=True)
def dbt_adapters_restored() -> Iterator[None]:
    """dbt's adapter registry as it was before the test. dbt run in this process (dbtRunner)
    resets the registry when it starts and leaves its adapter registered when it returns; dbt's
    `adapter` fixture keeps an adapter already registered for its type rather than its own. So
    the next test class's `project.run_sql` ran on this test's S3 warehouse, and its `dbt run`,
    back on the session's warehouse, found no such tables."""
    before = dict(FACTORY.adapters)
    yield
    with FACTORY.lock:
        left = [adapter for name, adapter in FACTORY.adapters.items() if before.get(name) is not adapter]
        FACTORY.adapters.clear()
        FACTORY.adapters.update(before)
    for adapter in left:
        adapter.cleanup_connections()


@pytest.fixture(scope="session")
def s3(dyntable_profile: str) -> Iterator[S3Server]:
    if dyntable_profile != "embedded":
        pytest.skip("object storage runs on the embedded engine here: JVM Spark needs hadoop-aws")
    server = S3Server()
    saved: Dict[str, str | None] = {k: os.environ.get(k) for k in server.credentials()}
    os.environ.update(server.credentials())
    try:
        yield server
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        server.stop()


@pytest.fixture
def s3_warehouse(s3: S3Server) -> str:
    """A warehouse of its own in the server's bucket."""
    return s3.url(f"wh_{uuid.uuid4().hex[:8]}")
