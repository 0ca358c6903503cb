{{ config(materialized='incremental', incremental_strategy='merge', unique_key='order_date') }}
-- Rebuilds the days touched since the last run; earlier days are kept as they are.
select
    o.order_date,
    count(*) as order_count,
    sum(case when o.is_revenue then o.amount else 0 end) as revenue,
    count(distinct o.status) as status_count
from {{ ref('stg_orders') }} as o
join {{ ref('order_statuses') }} as s on s.status = o.status
{% if is_incremental() %}
where o.order_date >= (select coalesce(max(order_date), date '1970-01-01') from {{ this }})
{% endif %}
group by o.order_date
