"""Benchmark 6: reading a source's changes from Delta's change data feed vs diffing its file sets,
on JVM Spark (the `session` engine), under scattered updates and deletes.

An update or delete rewrites every file it touches (copy-on-write), so file-set extraction reads
each rewritten file twice (as removed and as added) and cancels the copied rows; the change data
feed holds only the changed rows. This measures one source's changes over an interval, extracted
both ways from the same table (the feed on), checks both give the same delta, and reports the
time each takes to materialise them: the part of an incremental refresh that differs.

Delta's jars: ``--spark-jars DIR`` or ``DYNTABLE_SPARK_JARS`` (else Maven). Where the engine
cannot start, the result file says why and nothing is measured.

    .venv/bin/python -m benchmarks.change_feed [--full] [--spark-jars DIR]
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from rich.console import Console

from benchmarks.common import (
    Goal,
    add_spark_jars_option,
    command_line,
    docstring_paragraphs,
    jvm_engine,
    markdown_table,
    percent,
    seconds,
    timed,
    write_results,
)

if TYPE_CHECKING:
    from dbt.adapters.dyntable.delta_log import DeltaLog
    from dbt.adapters.dyntable.engines.jvm import JvmSparkEngine

NAME = "change_feed"
TITLE = "Benchmark 6: change data feed vs file-set diff for scattered updates and deletes (JVM Spark)"
FILES = 40
REPEATS = 3
#: (rows, changed fraction, changed rows net, files rewritten, rows in rewritten files, feed s,
#: file sets s)
Point = Tuple[int, float, int, int, int, float, float]


def extract(
    engine: "JvmSparkEngine", table: str, log: "DeltaLog", v0: int, v1: int, feed: bool
) -> Tuple[float, Dict[Tuple[Any, ...], int]]:
    """Seconds to materialise the changes of (v0, v1] (best of REPEATS), and their net delta."""
    from dbt.adapters.dyntable.changes import FileSetResolver
    from dbt.adapters.dyntable.engines.base import Capabilities
    from dbt.adapters.dyntable.vocabulary import WEIGHT

    capabilities = (
        engine.capabilities
        if feed
        else Capabilities(
            change_data_feed=False, truncate=False, alter_table_columns=True, persistent_catalog=True
        )
    )
    best, net = float("inf"), Counter[Tuple[Any, ...]]()
    for _ in range(REPEATS):
        with FileSetResolver(engine.spark, {table: (log, v0, v1)}, capabilities=capabilities) as resolver:
            view = resolver.changes(table)
            with timed() as timing:
                rows = engine.spark.sql(f"SELECT * FROM {view}").collect()
        best = min(best, timing.wall)
        net = Counter[Tuple[Any, ...]]()
        for row in rows:
            net[tuple(row)[:-1]] += row[WEIGHT]
    return best, {k: n for k, n in net.items() if n}


def run(
    engine: "JvmSparkEngine",
    warehouse: Path,
    sizes: Sequence[int],
    fractions: Sequence[float],
    console: Console,
) -> List[Point]:
    from dbt.adapters.dyntable.delta_log import DeltaLog

    engine.execute("CREATE SCHEMA IF NOT EXISTS bench")
    points: List[Point] = []
    for rows in sizes:
        table = f"bench.feed_{rows}"
        engine.execute(f"DROP TABLE IF EXISTS {table}")
        engine.execute(
            f"CREATE TABLE {table} (id BIGINT, k BIGINT, v DOUBLE, s STRING) USING delta "
            "TBLPROPERTIES (delta.enableChangeDataFeed = true)"
        )
        engine.spark.range(rows).selectExpr(
            "id", "id % 1000 AS k", "rand(7) AS v", "concat('s', id % 97) AS s"
        ).repartition(FILES).write.format("delta").mode("append").saveAsTable(table)
        location = engine.table_location("bench", f"feed_{rows}")
        assert location is not None, f"{table} was just written"
        log = DeltaLog(location)
        for fraction in fractions:
            v0 = log.latest_version()
            modulus = max(1, round(1 / fraction))
            # Scattered: every modulus-th id, so nearly every file holds a changed row.
            engine.execute(f"UPDATE {table} SET v = v + 1 WHERE id % {modulus} = 1")
            engine.execute(f"DELETE FROM {table} WHERE id % {modulus} = 2")
            v1 = log.latest_version()
            interval = log.interval(v0, v1)
            feed_s, feed_net = extract(engine, table, log, v0, v1, feed=True)
            files_s, files_net = extract(engine, table, log, v0, v1, feed=False)
            assert feed_net == files_net, f"{rows} rows, {fraction}: the feed and the file sets disagree"
            changed = sum(abs(n) for n in feed_net.values())
            rewritten = sum((f.num_records or 0) for f in interval.added + interval.removed)
            points.append((rows, fraction, changed, len(interval.removed), rewritten, feed_s, files_s))
            console.print(
                f"{rows:>11,} rows, {percent(fraction)} changed: feed {seconds(feed_s)} s, "
                f"file sets {seconds(files_s)} s ({rewritten:,} rows in rewritten files)"
            )
    return points


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--full", action="store_true", help="1M and 10M rows, four change fractions")
    add_spark_jars_option(parser)
    args = parser.parse_args(argv)
    command = command_line(NAME, args.full, None)
    intro = docstring_paragraphs(__doc__, 1)[0]
    console = Console()
    with jvm_engine(args.spark_jars, 120, "dyntable-bench-feed-") as (engine, warehouse, reason):
        if engine is None:
            write_results(
                NAME,
                TITLE,
                command,
                intro,
                [Goal("the change data feed measured against file sets", "skipped", None)],
                ["## Skipped", "", f"The session engine could not start: {reason}"],
            )
            console.print(f"benchmark 6 skipped: {reason.splitlines()[0]}")
            return
        sizes = [1_000_000, 10_000_000] if args.full else [1_000_000]
        fractions = [0.0001, 0.001, 0.01, 0.1] if args.full else [0.001, 0.01]
        points = run(engine, warehouse, sizes, fractions, console)
    write_results(NAME, TITLE, command, intro, goals(points), body(points))


def goals(points: List[Point]) -> List[Goal]:
    faster = [p for p in points if p[5] < p[6]]
    return [
        Goal(
            "scattered updates and deletes read faster from the change data feed than from file sets",
            f"faster at {len(faster)} of {len(points)} points; "
            f"{min(p[6] / p[5] for p in points):.1f}x to {max(p[6] / p[5] for p in points):.1f}x",
            len(faster) == len(points),
        )
    ]


def body(points: List[Point]) -> List[str]:
    lines = [
        "## Measurements",
        "",
        f"Each table is written as {FILES} files; best of {REPEATS} extractions.",
        "",
    ]
    return lines + markdown_table(
        [
            "rows",
            "changed",
            "changed rows (net)",
            "files rewritten",
            "rows in rewritten files",
            "feed s",
            "file sets s",
            "file sets / feed",
        ],
        [
            (f"{r:,}", percent(f), f"{c:,}", n, f"{w:,}", seconds(a), seconds(b), f"{b / a:.1f}x")
            for r, f, c, n, w, a, b in points
        ],
    )


if __name__ == "__main__":
    main()
