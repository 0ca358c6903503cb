{#- A seed reloaded with the columns it has keeps its Delta table: its rows are emptied and loaded
    again, where dbt-spark drops the table and creates it anew. Its history then continues, and the
    dynamic tables reading it see the rows that changed instead of a new table to rebuild from
    (docs/ARCHITECTURE.md, "Rewritten inputs"). -#}
{% macro dyntable__reset_csv_table(model, full_refresh, old_relation, agate_table) %}
  {%- set column_types = model['config'].get('column_types', {}) -%}
  {%- if not full_refresh and adapter.seed_keeps_table(old_relation, agate_table, column_types) -%}
    {{ return(default__reset_csv_table(model, full_refresh, old_relation, agate_table)) }}
  {%- endif -%}
  {{ return(spark__reset_csv_table(model, full_refresh, old_relation, agate_table)) }}
{% endmacro %}

{#- Neither engine's Delta tables take TRUNCATE: an overwrite with no rows empties one in a commit. -#}
{% macro dyntable__truncate_relation(relation) %}
  {% call statement('truncate_relation') -%}
    insert overwrite {{ relation.render() }} select * from {{ relation.render() }} where false
  {%- endcall %}
{% endmacro %}
