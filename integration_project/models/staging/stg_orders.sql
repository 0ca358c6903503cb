select
    order_id,
    customer_id,
    ordered_at,
    cast(ordered_at as date) as order_date,
    status,
    coalesce(amount, 0) as amount,
    status in ('completed', 'shipped') as is_revenue
from {{ ref('raw_orders') }}
