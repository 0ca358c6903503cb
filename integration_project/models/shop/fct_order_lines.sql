{{ config(materialized='dynamic_table', refresh_mode='incremental', target_lag='downstream') }}
-- One row per order line: inner joins to orders and products, a left join to payments.
select
    i.order_id,
    i.line_no,
    o.customer_id,
    o.order_date,
    o.status,
    p.category,
    i.quantity,
    i.unit_price,
    i.quantity * i.unit_price as line_amount,
    pay.method as payment_method
from {{ source('raw', 'order_items') }} as i
join {{ ref('dt_orders') }} as o on o.order_id = i.order_id
join {{ source('raw', 'products') }} as p on p.product_id = i.product_id
left join {{ source('raw', 'payments') }} as pay on pay.order_id = i.order_id
