{{ config(materialized='view') }}
-- A plain view over a dynamic table.
select segment, country_code, count(*) as customers
from {{ ref('dt_customers') }}
group by segment, country_code
