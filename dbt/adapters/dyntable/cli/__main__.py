"""`python -m dbt.adapters.dyntable.cli`, as the `dyntable` command."""

from dbt.adapters.dyntable.cli import app

app()
