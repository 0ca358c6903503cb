{% macro dyntable_consistent(relations) -%}
  {#- Each dynamic table of `relations` read at their latest common data timestamp, as SQL to put
      after FROM, in the same order (docs/ARCHITECTURE.md, "Consistent reads"):
        {% set revenue, orders = dyntable_consistent([ref('revenue'), ref('orders_daily')]) %}
        select ... from {{ revenue }} r join {{ orders }} o on ... -#}
  {{ return(adapter.consistent_relations(relations)) }}
{%- endmacro %}
