select
    customer_id,
    name as customer_name,
    lower(email) as email,
    upper(country) as country_code,
    cast(signed_up_at as date) as signed_up_on
from {{ ref('raw_customers') }}
