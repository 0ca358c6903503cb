{{ config(materialized='dynamic_table', refresh_mode='incremental', target_lag='2 minutes') }}
select
    order_date,
    count(distinct order_id) as orders,
    count(distinct customer_id) as customers,
    sum(line_amount) as revenue,
    max(unit_price) as top_unit_price
from {{ ref('fct_order_lines') }}
group by order_date
