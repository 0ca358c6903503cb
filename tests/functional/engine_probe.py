"""Another local process trying the embedded engine's isolated server (engines/isolated.py)."""

from __future__ import annotations

import subprocess
import sys
from typing import List

from dbt.adapters.dyntable.engines.isolated import IsolatedServer

#: Another local process trying the embedded engine: through its socket (as its owner does), and
#: on its port number on this machine's loopback. Each must be refused, for a read and a write.
PROBE = """
import socket, sys, uuid
from pyspark.sql.connect.client.retries import DefaultPolicy
from pyspark.sql.connect.session import SparkSession
from dbt.adapters.dyntable.engines.isolated import IsolatedServer

server = IsolatedServer.__new__(IsolatedServer)
server.folder = sys.argv[1]
outcomes = []
try:
    spark = SparkSession.builder.channelBuilder(server.channel_builder(str(uuid.uuid4()))).create()
    spark.client.set_retry_policies([DefaultPolicy(max_retries=1, max_backoff=100)])
    # By path, as any session may (its catalog is its own): the audit's probe did so.
    attempts = {
        "read": lambda: spark.sql("select * from delta.`" + sys.argv[3] + "`").collect(),
        "write": lambda: spark.sql("select 666 as a").write.format("delta").mode("append").save(sys.argv[3]),
    }
    for what, attempt in attempts.items():
        try:
            attempt()
            outcomes.append("ACCEPTED: " + what)
        except Exception as exc:
            outcomes.append("refused: " + what + " " + type(exc).__name__)
except Exception as exc:
    outcomes.append("refused: " + type(exc).__name__)
with socket.socket() as tcp:
    tcp.settimeout(5)
    try:
        tcp.connect(("127.0.0.1", int(sys.argv[2])))
        outcomes.append("ACCEPTED: tcp")
    except OSError as exc:
        outcomes.append("refused: tcp " + type(exc).__name__)
print("|".join(outcomes))
"""


def probe_from_another_process(server: IsolatedServer, port: int, location: str) -> List[str]:
    """What :data:`PROBE` met, run as a process of this user: one ``refused: ...`` or
    ``ACCEPTED: ...`` line per attempt (a read and a write through the socket, the TCP port)."""
    probe = [sys.executable, "-c", PROBE, server.folder, str(port), location]
    done = subprocess.run(probe, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().split("|")
