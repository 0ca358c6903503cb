{#
  refresh_boundary(ref('x')): read `x` across a refresh boundary (docs/ARCHITECTURE.md, "Refresh boundaries"; Snowflake's
  DYNAMIC_TABLE_REFRESH_BOUNDARY). The dynamic table reads x at whatever version x has when it
  refreshes, instead of at the pipeline's common data timestamp; the two pipelines then keep their
  own schedules, failures upstream of x do not block it, and its target lag is not bound by x's.

  Call it unqualified, {{ refresh_boundary(ref('x')) }}, or as dbt.refresh_boundary(...): dbt
  exposes an adapter plugin's macros under those names only, never under the plugin's own name.

  It renders the relation followed by a marker comment that the refresh and the `dyntable` runner
  find in the compiled SQL:  `shop`.`x` /* dyntable:refresh_boundary=shop.x */
  The dependency stays in dbt's DAG (ref still records it), so `dbt run` builds x first.
#}
{% macro refresh_boundary(relation) -%}
  {%- if relation is string -%}
    {{ exceptions.raise_compiler_error(
         "refresh_boundary() takes a relation, e.g. ref('orders_dt') or source('raw', 'orders'); "
         ~ "got the string '" ~ relation ~ "'.") }}
  {%- endif -%}
  {{ relation }} /* dyntable:refresh_boundary={{ (relation.schema ~ '.' ~ relation.identifier) | lower }} */
{%- endmacro %}
