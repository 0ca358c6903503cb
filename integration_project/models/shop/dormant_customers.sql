{{ config(materialized='dynamic_table', refresh_mode='incremental', target_lag='5 minutes') }}
-- Anti-join: customers with no order since the cutoff (a fixed date keeps the query deterministic).
select c.customer_id, c.name, c.country_code
from {{ ref('dt_customers') }} as c
where not exists (
    select 1 from {{ ref('dt_orders') }} as o
    where o.customer_id = c.customer_id
      and o.ordered_at >= timestamp '{{ var("dormant_since", "2026-02-15 00:00:00") }}'
)
