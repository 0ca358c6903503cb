"""dbt-dyntable benchmark suite (issue 6): run with `python -m benchmarks`."""

import importlib.util

# Each benchmark ends by drawing its plot: without matplotlib, a run of an hour would end in an
# ImportError and write no plot. Say so before it starts.
if importlib.util.find_spec("matplotlib") is None:
    raise SystemExit(
        "The benchmarks draw their plots with matplotlib, which is not installed: "
        "run `.venv/bin/pip install -e '.[bench]'` first."
    )
