{{ config(materialized='dynamic_table', target_lag='10 minutes') }}
-- A reporting pipeline behind a refresh boundary (docs/ARCHITECTURE.md): it reads all_sales at its current
-- version, so its schedule and failures are decoupled from the sales pipeline's.
select channel, sale_date, count(*) as sales, sum(amount) as amount
from {{ refresh_boundary(ref('all_sales')) }}
group by channel, sale_date
