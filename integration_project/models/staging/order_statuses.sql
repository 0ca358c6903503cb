{{ config(materialized='ephemeral') }}
select distinct status from {{ ref('stg_orders') }}
