{{ config(materialized='dynamic_table', target_lag='2 minutes') }}
select
    c.customer_id,
    c.country_code,
    c.segment,
    count(distinct f.order_id) as orders,
    sum(f.line_amount) as spend,
    min(f.order_date) as first_order_date,
    max(f.order_date) as last_order_date
from {{ ref('dt_customers') }} as c
join {{ ref('fct_order_lines') }} as f on f.customer_id = c.customer_id
group by c.customer_id, c.country_code, c.segment
