{{ config(materialized='dynamic_table', refresh_mode='incremental', target_lag='1 minute') }}
-- Both sales channels in one table.
select 'web' as channel, o.order_id as sale_id, o.customer_id, o.order_date as sale_date, p.amount
from {{ ref('dt_orders') }} as o
join {{ source('raw', 'payments') }} as p on p.order_id = o.order_id
union all
select 'store' as channel, s.sale_id, s.customer_id, cast(s.sold_at as date) as sale_date, s.amount
from {{ source('raw', 'store_sales') }} as s
