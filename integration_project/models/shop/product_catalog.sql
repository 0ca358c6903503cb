{{ config(materialized='table') }}
select product_id, name, category, price from {{ source('raw', 'products') }}
