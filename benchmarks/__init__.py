"""dbt-dyntable benchmark suite (issue 6): run with `python -m benchmarks`."""
