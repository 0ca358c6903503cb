"""The shop's data generator: raw Delta tables written the way an ingest job writes them.

It writes straight to the Delta tables with the `deltalake` package (no Spark), so the pipeline
sees exactly what an external writer produces: appends, updates and deletes committed as separate
Delta versions, including late and out-of-order orders and customers changing attributes.

    python generator.py init   --warehouse .dyntable/warehouse       # create raw.* with history
    python generator.py stream --warehouse .dyntable/warehouse --seconds 120 --batches-per-second 2
"""

from __future__ import annotations

import argparse
import random
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Dict, List

import pyarrow as pa
import pyarrow.fs as pa_fs
from deltalake import DeltaTable, write_deltalake

SCHEMA = "raw"
EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)
COUNTRIES = ["GB", "US", "NL", "DE", "FR", "JP"]
SEGMENTS = ["consumer", "business", "vip"]
CATEGORIES = ["books", "games", "garden", "kitchen", "toys"]
STATUSES = ["placed", "paid", "shipped", "delivered"]
METHODS = ["card", "paypal", "transfer"]
TS = pa.timestamp("us", tz="UTC")

TABLES: Dict[str, pa.Schema] = {
    "customers": pa.schema(
        [
            ("customer_id", pa.int64()),
            ("name", pa.string()),
            ("email", pa.string()),
            ("country", pa.string()),
            ("segment", pa.string()),
            ("updated_at", TS),
        ]
    ),
    "products": pa.schema(
        [
            ("product_id", pa.int64()),
            ("name", pa.string()),
            ("category", pa.string()),
            ("price", pa.float64()),
        ]
    ),
    "orders": pa.schema(
        [
            ("order_id", pa.int64()),
            ("customer_id", pa.int64()),
            ("ordered_at", TS),
            ("status", pa.string()),
            ("ingested_at", TS),
        ]
    ),
    "order_items": pa.schema(
        [
            ("order_id", pa.int64()),
            ("line_no", pa.int32()),
            ("product_id", pa.int64()),
            ("quantity", pa.int32()),
            ("unit_price", pa.float64()),
        ]
    ),
    "payments": pa.schema(
        [
            ("payment_id", pa.int64()),
            ("order_id", pa.int64()),
            ("amount", pa.float64()),
            ("method", pa.string()),
            ("paid_at", TS),
        ]
    ),
    "store_sales": pa.schema(
        [
            ("sale_id", pa.int64()),
            ("store", pa.string()),
            ("customer_id", pa.int64()),
            ("sold_at", TS),
            ("amount", pa.float64()),
        ]
    ),
}


class Shop:
    def __init__(self, warehouse: str, seed: int = 7) -> None:
        """``warehouse``: a local folder, or an object store's URL (s3://bucket/path), which
        deltalake reaches with the standard environment variables (AWS_ACCESS_KEY_ID, ...,
        AWS_ENDPOINT_URL for a server of your own)."""
        self.remote = "://" in warehouse
        self.root = f"{warehouse.rstrip('/')}/{SCHEMA}"
        self.rng = random.Random(seed)

    def path(self, table: str) -> str:
        return f"{self.root}/{table}"

    def append(self, table: str, rows: List[dict]) -> None:
        if rows:
            write_deltalake(self.path(table), pa.Table.from_pylist(rows, schema=TABLES[table]), mode="append")

    def next_id(self, table: str, column: str) -> int:
        # Arrow's local filesystem, not deltalake's Python-backed default: Arrow threads calling
        # back into Python can abort the process at exit.
        table_object = DeltaTable(self.path(table))
        if self.remote:
            values = table_object.to_pyarrow_table(columns=[column]).column(column).to_pylist()
        else:
            local = pa_fs.SubTreeFileSystem(str(Path(self.path(table)).resolve()), pa_fs.LocalFileSystem())
            values = (
                table_object.to_pyarrow_table(columns=[column], filesystem=local).column(column).to_pylist()
            )
        return max(values, default=0) + 1

    # -- init ------------------------------------------------------------------------------------

    def init(
        self, customers: int = 2000, products: int = 60, orders: int = 20000, batches: int = 100
    ) -> None:
        """History as an ingest job leaves it: many small appends, so many files per table.

        Updates rewrite whole files; with the data spread over many files, a later update touches
        a small share of a table's bytes and the pipeline can refresh incrementally.
        """
        if not self.remote:
            Path(self.root).mkdir(parents=True, exist_ok=True)
        for table, schema in TABLES.items():
            DeltaTable.create(self.path(table), schema=schema, mode="overwrite")
        rng = self.rng
        self.append(
            "products",
            [
                {
                    "product_id": p,
                    "name": f"product {p}",
                    "category": rng.choice(CATEGORIES),
                    "price": round(rng.uniform(2, 200), 2),
                }
                for p in range(1, products + 1)
            ],
        )
        start = EPOCH + timedelta(days=30)
        for batch in range(batches):
            now = start + timedelta(days=30 * (batch + 1) / batches)
            first_customer = batch * customers // batches + 1
            last_customer = (batch + 1) * customers // batches
            self.append(
                "customers", [self._customer(i, now) for i in range(first_customer, last_customer + 1)]
            )
            self.orders(orders // batches, batch * (orders // batches) + 1, now, last_customer)
            self.store_sales(orders // batches // 5, batch * (orders // batches // 5) + 1, now, last_customer)

    def _customer(self, customer_id: int, at: datetime) -> dict:
        rng = self.rng
        return {
            "customer_id": customer_id,
            "name": f"customer {customer_id}",
            "email": None if rng.random() < 0.05 else f"c{customer_id}@example.com",
            "country": rng.choice(COUNTRIES),
            "segment": rng.choice(SEGMENTS),
            "updated_at": at,
        }

    def orders(self, count: int, first_order: int, now: datetime, customers: int) -> None:
        rng = self.rng
        orders, items, payments = [], [], []
        for order_id in range(first_order, first_order + count):
            # ~10% arrive late: ordered up to two weeks before they are ingested
            late = timedelta(days=rng.uniform(0, 14)) if rng.random() < 0.1 else timedelta(0)
            ordered_at = now - late - timedelta(minutes=rng.uniform(0, 60 * 24 * 30))
            status = rng.choice(STATUSES)
            orders.append(
                {
                    "order_id": order_id,
                    "customer_id": rng.randint(1, customers),
                    "ordered_at": ordered_at,
                    "status": status,
                    "ingested_at": now,
                }
            )
            total = 0.0
            for line in range(1, rng.randint(1, 4) + 1):
                quantity, price = rng.randint(1, 5), round(rng.uniform(2, 200), 2)
                total += quantity * price
                items.append(
                    {
                        "order_id": order_id,
                        "line_no": line,
                        "product_id": rng.randint(1, 60),
                        "quantity": quantity,
                        "unit_price": price,
                    }
                )
            if status != "placed":
                payments.append(
                    {
                        "payment_id": order_id,
                        "order_id": order_id,
                        "amount": round(total, 2),
                        "method": rng.choice(METHODS),
                        "paid_at": ordered_at + timedelta(minutes=5),
                    }
                )
        # out of order: the batch is appended shuffled
        rng.shuffle(orders)
        self.append("orders", orders)
        self.append("order_items", items)
        self.append("payments", payments)

    def store_sales(self, count: int, first_sale: int, now: datetime, customers: int) -> None:
        rng = self.rng
        self.append(
            "store_sales",
            [
                {
                    "sale_id": s,
                    "store": rng.choice(["london", "amsterdam", "tokyo"]),
                    "customer_id": rng.randint(1, customers) if rng.random() < 0.7 else None,
                    "sold_at": now - timedelta(minutes=rng.uniform(0, 600)),
                    "amount": round(rng.uniform(5, 300), 2),
                }
                for s in range(first_sale, first_sale + count)
            ],
        )

    # -- stream ----------------------------------------------------------------------------------

    def batch(self, now: datetime) -> str:
        """One ingest step: a random kind of change, committed as one Delta version."""
        rng = self.rng
        customers = self.next_id("customers", "customer_id") - 1
        kind = rng.choices(
            [
                "new_orders",
                "status_updates",
                "customer_changes",
                "cancellations",
                "new_customers",
                "store_sales",
                "price_change",
            ],
            weights=[40, 20, 12, 8, 8, 10, 2],
        )[0]
        if kind == "new_orders":
            self.orders(rng.randint(5, 40), self.next_id("orders", "order_id"), now, customers)
        elif kind == "status_updates":
            low = rng.randint(1, max(1, self.next_id("orders", "order_id") - 50))
            DeltaTable(self.path("orders")).update(
                updates={"status": "'delivered'"},
                predicate=f"order_id between {low} and {low + rng.randint(1, 30)} and status = 'shipped'",
            )
        elif kind == "customer_changes":
            ids = ", ".join(str(rng.randint(1, customers)) for _ in range(rng.randint(1, 5)))
            DeltaTable(self.path("customers")).update(
                updates={
                    "country": f"'{rng.choice(COUNTRIES)}'",
                    "segment": f"'{rng.choice(SEGMENTS)}'",
                    "updated_at": f"timestamp '{now.strftime('%Y-%m-%d %H:%M:%S')}'",
                },
                predicate=f"customer_id in ({ids})",
            )
        elif kind == "cancellations":
            ids = ", ".join(str(rng.randint(1, self.next_id("orders", "order_id") - 1)) for _ in range(3))
            for table in ("orders", "order_items", "payments"):
                DeltaTable(self.path(table)).delete(f"order_id in ({ids})")
        elif kind == "new_customers":
            first = customers + 1
            self.append(
                "customers", [self._customer(i, now) for i in range(first, first + rng.randint(1, 5))]
            )
        elif kind == "store_sales":
            self.store_sales(rng.randint(1, 20), self.next_id("store_sales", "sale_id"), now, customers)
        else:
            DeltaTable(self.path("products")).update(
                updates={"price": f"round(price * {rng.uniform(0.9, 1.1):.3f}, 2)"},
                predicate=f"category = '{rng.choice(CATEGORIES)}'",
            )
        return kind

    def stream(self, seconds: float, batches_per_second: float) -> Dict[str, int]:
        counts: Dict[str, int] = {}
        deadline = time.monotonic() + seconds
        step = 1.0 / batches_per_second
        simulated = EPOCH + timedelta(days=60)
        while time.monotonic() < deadline:
            started = time.monotonic()
            simulated += timedelta(minutes=10)
            kind = self.batch(simulated)
            counts[kind] = counts.get(kind, 0) + 1
            time.sleep(max(0.0, step - (time.monotonic() - started)))
        return counts


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=["init", "stream"])
    parser.add_argument("--warehouse", default=".dyntable/warehouse", help="a folder, or s3://bucket/path")
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--batches-per-second", type=float, default=2)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    warehouse = args.warehouse if "://" in args.warehouse else str(Path(args.warehouse).resolve())
    shop = Shop(warehouse, args.seed)
    if args.command == "init":
        shop.init()
        print(f"created {', '.join(f'{SCHEMA}.{t}' for t in TABLES)} in {args.warehouse}")
    else:
        counts = shop.stream(args.seconds, args.batches_per_second)
        print("ingested: " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())))


if __name__ == "__main__":
    main()
