{{ config(materialized='dynamic_table', refresh_mode='incremental', target_lag='downstream') }}
select
    customer_id,
    name,
    coalesce(lower(email), 'unknown') as email,
    upper(country) as country_code,
    segment
from {{ source('raw', 'customers') }}
