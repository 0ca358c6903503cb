"""The `dyntable` command: keeps a dbt project's dynamic tables within their target lag.

    dyntable run [--once | --for 2m] [--time-scale 0.05]     the scheduler
    dyntable run --ui [--ui-port 8765] [--log-format json]    ... with its live page and /metrics
    dyntable ui                                               the live page beside a running runner
    dyntable refresh MODEL                                    a manual refresh (upstream DTs too)
    dyntable suspend|resume MODEL
    dyntable status | graph | history MODEL | explain MODEL | report
    dyntable verify MODEL [--mode full|sample]                the table against its query
    dyntable snapshot MODEL...                                the DTs' latest common data timestamp
    dyntable repair                                           rebuild metadata tables, find damaged DTs

It works on a dbt project as dbt does (--project-dir, --profiles-dir, --target, --select), parses
and compiles it once through dbt's Python API, then refreshes through one warm engine.

Exit codes: 0 success, or a runner stopped by SIGTERM or SIGINT within --stop-timeout; 1 a
refresh failed or a metadata table is damaged; 2 bad input (project, profile, graph, model name),
in which case nothing was refreshed; 128 + the signal when a stop is forced (a second signal, or
past --stop-timeout).
"""

from dbt.adapters.dyntable.cli.base import app

# Importing a command's module registers it on `app`, in this order, which `dyntable --help`
# keeps: `run` and `ui` first, as what a user starts with.
# isort: off
from dbt.adapters.dyntable.cli import run, actions, status, repair, explain  # noqa: F401
# isort: on

__all__ = ["app"]
