"""What a refresh costs the user (issue 17): per-model time of `dbt run` and per-DT time of `dyntable
run`, beside the in-process figures of the same dynamic tables on the same data.

For each fact size a real dbt project is written to a temp folder (dbt_project.yml, profiles.yml
with `type: dyntable`, the warehouse beside them): the four DT shapes of data.py over the fact as
sources, each kept twice (refresh_mode incremental and full), two more copies of the join + group-by
DT (the headline shape: three samples per run), and the join written by hand as a dbt-spark
`merge` incremental model. `dbt run` and `dyntable run --once` run as users run them, as
subprocesses of the venv's executables with `threads: 1`, their bytecode cached as an installed
package's is; a model's time is its `execution_time` in target/run_results.json, a runner
refresh's is refresh_end_time - refresh_start_time in dynamic_table_refresh_history, which also
gives the refresh's own share of each dbt model time.
Rows are inserted between runs by another writer (the `deltalake` package), never by the process
measured. NO_DATA is a run with no source change: the median over every DT of five such runs, and
the first DT of each process (which pays the process's setup) on its own, the median over the
runs. INCREMENTAL follows 1,000 inserted rows, in three runs each after its insert; FULL is the
refresh_mode='full' twin in the same runs, and `dbt run --full-refresh` of the headline DT (a
REINITIALIZE). The insert-only 0.1% sweep compares each shape's incremental DT with its full twin,
through dbt and in-process (the DTs refreshed by a DynamicTableService in this process, each
round one metadata batch as a runner tick is, as refresh_vs_full.py does), each figure the median over three runs, each after its own insert of
0.1%; the headline shape's incremental figure is the median over its three copies too.

After 1,000 earlier refreshes: this process drives the runner's Scheduler over the three join +
group-by DTs, one tick (one metadata batch) at a time, as `dyntable run` would over a long day:
mostly NO_DATA ticks, and every 25th tick after five source commits of 100 rows (INCREMENTAL), until
each has 1,000 refreshes in its history. The fact's 200 small appended files are then compacted, as
a maintained table's would be (into files the size of the load's, whose files stay), so what grows
is what dbt-dyntable keeps (metadata tables, the DTs' logs); the hand-written merge model, timed in
the same runs, is the control. One more tick catches the other DTs up, then NO_DATA and INCREMENTAL
are measured through dbt again (ten runs of the whole project with no change, three after an
insert), in turns with a copy of the project taken after its first runs: the two states are
compared under the same machine conditions, which drift between minutes of a run by more than the
goal's 1.2x.

On JVM Spark (`method: session`, `spark_jars` from DYNTABLE_SPARK_JARS or --spark-jars), the same
project builds its sources with `dbt run-operation` and the same dbt runs are measured, the
hand-written merge model timed in the same `dbt run` as the DTs.

    .venv/bin/python -m benchmarks.user_cost            # quick: 1M and 10M rows, history at 1M
    .venv/bin/python -m benchmarks.user_cost --full     # 1M, 10M and 100M rows, history at each

Results: benchmarks/results/user_cost.md, user_cost.goals.json and user_cost.png.

Its modules, in the order a run goes through them: parameters (sizes, runs, goals), models (the
project's), recorder (`dbt run` and `dyntable run --once` timed per model), embedded, in_process,
history and jvm (the phases), results (what was measured, saved as results/user_cost.json), figures
(the medians read from it), goals, report and plot; __main__ runs them.
"""
