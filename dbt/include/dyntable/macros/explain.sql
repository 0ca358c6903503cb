{#
  How the current dynamic-table model refreshes, as `dyntable explain` prints it: the plan, the
  rule differentiating each node, its row key and the delta SQL, or why it refreshes FULL.
  In a model: {{ config(post_hook="{{ log(dyntable_explain(), info=True) }}") }}
  dbt also renders hooks while parsing, when no engine is there: the macro is empty then.
#}
{% macro dyntable_explain() %}
  {%- if not execute -%}{{ return('') }}{%- endif -%}
  {{ return(adapter.explain_dynamic_table(
      this.incorporate(type='table'), model.compiled_code, config.model.config, model.name,
      graph, model.unique_id)) }}
{% endmacro %}
