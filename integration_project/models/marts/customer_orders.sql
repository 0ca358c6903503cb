select
    c.customer_id,
    c.customer_name,
    c.country_code,
    count(o.order_id) as order_count,
    coalesce(sum(case when o.is_revenue then o.amount end), 0) as revenue,
    min(o.ordered_at) as first_ordered_at,
    max(o.ordered_at) as last_ordered_at
from {{ ref('stg_customers') }} as c
left join {{ ref('stg_orders') }} as o on o.customer_id = c.customer_id
group by c.customer_id, c.customer_name, c.country_code
