"""The benchmark data set: an orders fact with customer and product dimensions, the DT queries
over it, and the changes applied between refreshes.

The fact is loaded by one CTAS over a UNION ALL of id ranges, so it lands in many files (about
125k rows each) the way an ingested table does; one file per core would make every update
rewrite half the table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict

if TYPE_CHECKING:
    import pyarrow as pa

SCHEMA = "bench"
CUSTOMERS = 100_000
PRODUCTS = 10_000
ROWS_PER_LOAD_BRANCH = 250_000
MAX_LOAD_BRANCHES = 40

#: Realistic DT queries: several joins, string and date expressions, a window.
SHAPES: Dict[str, str] = {
    "filter/project": f"""
        select id, customer_id, upper(channel) as channel, round(amount * 1.2, 2) as gross,
               date_format(order_date, 'yyyy-MM') as order_month
        from {SCHEMA}.fact where amount > 10 and channel like 'w%'""",
    "join": f"""
        select f.id, f.order_date, f.amount, c.country, c.segment, p.category,
               concat(c.country, '-', upper(f.channel)) as market,
               date_add(f.order_date, p.ship_days) as ship_date
        from {SCHEMA}.fact as f
        join {SCHEMA}.customers as c on c.customer_id = f.customer_id
        join {SCHEMA}.products as p on p.product_id = f.product_id
        where f.amount > 5""",
    "group-by": f"""
        select c.country, f.channel, date_format(f.order_date, 'yyyy-MM') as order_month,
               count(*) as orders, sum(f.amount) as revenue
        from {SCHEMA}.fact as f join {SCHEMA}.customers as c on c.customer_id = f.customer_id
        group by c.country, f.channel, date_format(f.order_date, 'yyyy-MM')""",
    "window": f"""
        select customer_id, id, amount, order_date from (
            select customer_id, id, amount, order_date,
                   row_number() over (partition by customer_id order by amount desc, id) as rk
            from {SCHEMA}.fact) as ranked
        where rk = 1""",
}

KINDS = ["insert", "mixed clustered", "mixed scattered"]
KIND_NOTES = {
    "insert": "new orders appended",
    "mixed clustered": "a third updated, a third deleted among the most recent orders, a third inserted",
    "mixed scattered": "a third updated, a third deleted spread evenly over the whole fact, a third inserted",
}


def fact_rows(start: int, end: int) -> str:
    return (
        f"SELECT id, cast(id * 7919 % {CUSTOMERS} as bigint) AS customer_id, "
        f"cast(id * 104729 % {PRODUCTS} as bigint) AS product_id, "
        "element_at(array('web','store','wholesale'), cast(id % 3 + 1 as int)) AS channel, "
        "cast(id * 31 % 1000 as double) / 10 AS amount, "
        "date_add(date '2024-01-01', cast(id * 13 % 730 as int)) AS order_date "
        f"FROM range({start}, {end})"
    )


def fact_arrow(start: int, end: int) -> "pa.Table":
    """The rows ``fact_rows(start, end)`` selects, as an Arrow table: for writers outside the engine
    (an ingest job appending with the ``deltalake`` package)."""
    import numpy as np
    import pyarrow as pa

    ids = np.arange(start, end, dtype=np.int64)
    days = (ids * 13 % 730).astype("timedelta64[D]")
    return pa.table(
        {
            "id": ids,
            "customer_id": ids * 7919 % CUSTOMERS,
            "product_id": ids * 104729 % PRODUCTS,
            "channel": pa.array(np.array(["web", "store", "wholesale"])[ids % 3], pa.string()),
            "amount": (ids * 31 % 1000).astype(np.float64) / 10,
            "order_date": pa.array(np.datetime64("2024-01-01", "D") + days, pa.date32()),
        }
    )


class Fact:
    """The bench schema on an engine, and the changes made to its fact."""

    def __init__(self, engine: Any) -> None:
        # Any engine's execute(...).collect(): the embedded engine, JVM Spark, or a recorder of the
        # statements (a dbt macro runs them on JVM Spark).
        self.engine = engine
        self.next_id = 0

    def sql(self, statement: str) -> None:
        self.engine.execute(statement).collect()

    def load(self, rows: int) -> None:
        self.sql(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        self.sql(
            f"CREATE TABLE {SCHEMA}.customers USING delta AS SELECT id AS customer_id, "
            "element_at(array('GB','US','NL','DE','JP'), cast(id % 5 + 1 as int)) AS country, "
            "element_at(array('consumer','business'), cast(id % 2 + 1 as int)) AS segment "
            f"FROM range({CUSTOMERS})"
        )
        self.sql(
            f"CREATE TABLE {SCHEMA}.products USING delta AS SELECT id AS product_id, "
            "concat('cat-', cast(id % 40 as string)) AS category, cast(id % 7 + 1 as int) AS ship_days "
            f"FROM range({PRODUCTS})"
        )
        branches = min(MAX_LOAD_BRANCHES, max(1, rows // ROWS_PER_LOAD_BRANCH))
        bounds = [rows * i // branches for i in range(branches + 1)]
        union = " UNION ALL ".join(fact_rows(lo, hi) for lo, hi in zip(bounds, bounds[1:]))
        self.sql(f"CREATE TABLE {SCHEMA}.fact USING delta AS {union}")
        self.next_id = rows

    def insert(self, count: int) -> None:
        self.sql(f"INSERT INTO {SCHEMA}.fact {fact_rows(self.next_id, self.next_id + count)}")
        self.next_id += count

    def change(self, kind: str, count: int) -> None:
        """``count`` changed rows of ``kind`` (mixed kinds keep the fact's size steady)."""
        if kind == "insert":
            self.insert(count)
            return
        third = max(1, count // 3)
        if kind == "mixed clustered":
            # The most recent 2·third ids: even ones updated, odd ones deleted.
            low = self.next_id - 2 * third
            self.sql(f"UPDATE {SCHEMA}.fact SET amount = amount + 1 WHERE id >= {low} AND id % 2 = 0")
            self.sql(f"DELETE FROM {SCHEMA}.fact WHERE id >= {low} AND id % 2 = 1")
        else:
            step = max(2, self.next_id // third)
            self.sql(f"UPDATE {SCHEMA}.fact SET amount = amount + 1 WHERE id % {step} = 0")
            self.sql(f"DELETE FROM {SCHEMA}.fact WHERE id % {step} = {step // 2}")
        self.insert(third)
