"""A process that used the metadata store exits cleanly.

deltalake reads through a Python-implemented filesystem by default; Arrow I/O threads calling back
into it while the interpreter exits abort the process ("terminate called without an active
exception"), so every `dyntable` command would exit 134 after doing its work. The store reads
through Arrow's own local filesystem instead.
"""

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import sys
    from datetime import datetime, timezone
    from pathlib import Path
    from dbt.adapters.dyntable.dynamic_table.lifecycle import Action, State, Trigger
    from dbt.adapters.dyntable.dynamic_table.metadata import HistoryRow, MetadataStore

    store = MetadataStore(Path(sys.argv[1]), "meta")
    store.ensure()
    now = datetime.now(timezone.utc)
    for i in range(60):
        name = f"m{i % 3}"
        store.append_history(HistoryRow(
            name=name, refresh_id=str(i), data_timestamp=now, state=State.SUCCEEDED,
            refresh_action=Action.INCREMENTAL, refresh_trigger=Trigger.MANUAL,
            refresh_start_time=now, refresh_end_time=now,
        ))
        assert len(store.history(name)) == i // 3 + 1
    print("done")
    """
)


@pytest.mark.slow
def test_process_using_the_store_exits_with_zero(tmp_path):
    for attempt in range(4):  # the abort was not certain on every run
        run = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(tmp_path / f"meta{attempt}")],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.stdout.strip() == "done"
