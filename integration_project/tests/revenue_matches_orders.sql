-- Revenue per customer must add up to the revenue of all revenue-bearing orders.
select total_from_customers, total_from_orders
from (
    select
        (select sum(revenue) from {{ ref('customer_orders') }}) as total_from_customers,
        (select coalesce(sum(amount), 0) from {{ ref('stg_orders') }} where is_revenue) as total_from_orders
) as t
where total_from_customers <> total_from_orders
