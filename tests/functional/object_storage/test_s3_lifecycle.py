"""The whole dbt lifecycle with the warehouse in an S3 server (docs/ARCHITECTURE.md, "Object
storage"): sources another tool writes there, seeds, views, table and incremental models, a
snapshot and dynamic tables; appends, a reseed, a source re-created, restored and given a new
column; `dbt docs generate`, `dyntable` commands and a runner tick. After each step every dynamic
table equals its query at its data timestamp."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

from dbt.adapters.dyntable.testing.s3_server import S3Server
from tests.functional.object_storage.helpers import S3Project

DTS = ("orders_dt", "country_dt", "top_dt")


def orders(ids, customers, amounts) -> pa.Table:
    return pa.table(
        {
            "order_id": pa.array(ids, pa.int64()),
            "customer_id": pa.array(customers, pa.int64()),
            "amount": pa.array(amounts, pa.float64()),
        }
    )


def build(project: S3Project) -> None:
    project.write("seeds/customers.csv", "customer_id,country\n1,NL\n2,GB\n3,FR\n")
    project.write(
        "models/sources.yml",
        "version: 2\nsources:\n  - name: raw\n    schema: raw\n    tables:\n      - name: orders\n",
    )
    project.write(
        "models/orders_v.sql",
        "{{ config(materialized='view') }}\nselect * from {{ source('raw', 'orders') }}",
    )
    project.write(
        "models/customers_t.sql", "{{ config(materialized='table') }}\nselect * from {{ ref('customers') }}"
    )
    project.write(
        "models/orders_inc.sql",
        "{{ config(materialized='incremental', unique_key='order_id', incremental_strategy='merge') }}\n"
        "select order_id, amount from {{ source('raw', 'orders') }}",
    )
    project.write(
        "snapshots/customers_snap.sql",
        "{% snapshot customers_snap %}\n{{ config(target_schema='app', unique_key='customer_id', "
        "strategy='check', check_cols='all') }}\nselect * from {{ ref('customers') }}\n{% endsnapshot %}",
    )
    project.write(
        "models/orders_dt.sql",
        "{{ config(materialized='dynamic_table', target_lag='1 minute') }}\n"
        "select customer_id, count(*) as orders, sum(amount) as amount from {{ ref('orders_v') }} group by customer_id",
    )
    project.write(
        "models/country_dt.sql",
        "{{ config(materialized='dynamic_table', target_lag='1 minute') }}\n"
        "select c.country, count(*) as orders from {{ source('raw', 'orders') }} as o "
        "join {{ ref('customers') }} as c on o.customer_id = c.customer_id group by c.country",
    )
    project.write(
        "models/top_dt.sql",
        "{{ config(materialized='dynamic_table', target_lag='1 minute') }}\n"
        "select max(amount) as top_amount, sum(orders) as orders from {{ ref('orders_dt') }}",
    )


def test_the_lifecycle_on_object_storage(tmp_path: Path, s3: S3Server, s3_warehouse: str) -> None:
    project = S3Project(tmp_path, s3, s3_warehouse)
    build(project)
    project.write_source("orders", orders([1, 2, 3], [1, 2, 1], [10.0, 20.0, 5.0]))
    project.dbt("build")
    project.assert_matches(*DTS)

    # An append by the other tool: the DT over it refreshes incrementally.
    project.write_source("orders", orders([4, 5], [3, 2], [7.5, 1.0]))
    project.dbt("run")
    assert project.last_action("orders_dt") == "INCREMENTAL"
    project.assert_matches(*DTS)

    # A reseed: the DT reading the seed takes the rows the reload changed, folded into its counts.
    project.write("seeds/customers.csv", "customer_id,country\n1,NL\n2,NL\n3,FR\n")
    project.dbt("seed")
    project.dbt("run", "--select", "country_dt")
    assert project.last_action("country_dt") == "INCREMENTAL"
    project.assert_matches(*DTS)

    # The source re-created by the other tool, then restored to an older version.
    project.write_source("orders", orders([7, 8], [1, 3], [2.0, 3.0]), mode="overwrite")
    project.dbt("run")
    project.assert_matches(*DTS)
    DeltaTable(project.source("orders"), storage_options=project.server_options()).restore(1)
    project.dbt("run")
    assert project.last_action("orders_dt") == "REINITIALIZE"
    project.assert_matches(*DTS)

    # A new column: the DTs rebuild over the new schema.
    widened = orders([9], [2], [4.0]).append_column("channel", pa.array(["web"]))
    project.write_source("orders", widened, schema_mode="merge")
    project.dbt("run")
    project.assert_matches(*DTS)

    # dbt docs, then a runner tick in a process of its own.
    project.dbt("docs", "generate")
    catalog = json.loads((tmp_path / "target" / "catalog.json").read_text())
    described = [n for n in catalog["nodes"].values() if n["metadata"]["name"] == "orders_dt"]
    assert described and described[0]["metadata"].get("type") is not None
    assert any(s.get("id") == "target_lag" for s in described[0]["stats"].values())
    project.write_source(
        "orders", orders([10, 11], [1, 1], [1.0, 1.0]).append_column("channel", pa.array(["a", "b"]))
    )
    project.dyntable("run", "--once")
    assert project.last_action("orders_dt") == "INCREMENTAL"
    project.assert_matches(*DTS)
