{{ config(materialized='dynamic_table', refresh_mode='incremental', target_lag='downstream') }}
-- Staging: typed, cleaned orders. Refreshed as often as its consumers need.
select
    order_id,
    customer_id,
    ordered_at,
    cast(ordered_at as date) as order_date,
    status,
    status in ('paid', 'shipped', 'delivered') as is_paid
from {{ source('raw', 'orders') }}
