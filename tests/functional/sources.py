"""The sources of tests: the YAML of raw tables living in ``<target schema>_raw``, and writers
writing them as other tools do."""

import json
import time
import uuid
from pathlib import Path


def raw_sources(*tables: str) -> str:
    """A `sources.yml` declaring ``tables`` as source ``raw``, in the test schema's ``_raw`` sibling."""
    listed = "".join(f"      - name: {table}\n" for table in tables)
    return f'version: 2\nsources:\n  - name: raw\n    schema: "{{{{ target.schema }}}}_raw"\n    tables:\n{listed}'


def one_row_commits(table: Path, first_id: int, count: int) -> None:
    """Append ``count`` commits of one row each (``id``, ``kind``) to the Delta table at
    ``table``, as a writer committing each event as it comes does: a Parquet file and a JSON
    commit each, written straight (thousands in seconds, where a writer's library takes
    milliseconds per commit), no checkpoint."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    log = table / "_delta_log"
    version = max(int(p.name[:20]) for p in log.glob("*.json")) + 1
    schema = pa.schema([("id", pa.int64()), ("kind", pa.string())])
    for offset in range(count):
        name = f"part-{uuid.uuid4()}.parquet"
        row = pa.table({"id": [first_id + offset], "kind": ["abc"[offset % 3]]}, schema=schema)
        pq.write_table(row, table / name)
        now = int(time.time() * 1000)
        actions = [
            {
                "commitInfo": {
                    "timestamp": now,
                    "operation": "WRITE",
                    "operationParameters": {"mode": "Append"},
                }
            },
            {
                "add": {
                    "path": name,
                    "partitionValues": {},
                    "size": (table / name).stat().st_size,
                    "modificationTime": now,
                    "dataChange": True,
                    "stats": json.dumps({"numRecords": 1}),
                }
            },
        ]
        (log / f"{version + offset:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
