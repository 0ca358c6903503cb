{{ config(materialized='dynamic_table', refresh_mode='incremental', target_lag='1 minute') }}
-- Top-1 per partition: each customer's most recent order.
select customer_id, order_id, ordered_at, status
from (
    select
        customer_id, order_id, ordered_at, status,
        row_number() over (partition by customer_id order by ordered_at desc, order_id desc) as recency
    from {{ ref('dt_orders') }}
) as ranked
where recency = 1
