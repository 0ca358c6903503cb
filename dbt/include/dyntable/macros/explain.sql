{#
  How the current dynamic-table model refreshes, as `dyntable explain` prints it: the plan, the
  rule differentiating each node, its row key and the delta SQL, or why it refreshes FULL.
  In a model: {{ config(post_hook="{{ log(dyntable_explain(), info=True) }}") }}
  dbt also renders hooks while parsing, when no engine is there: the adapter's methods return
  empty stubs then.
#}
{% macro dyntable_explain() %}
  {{ return(adapter.explain_dynamic_table(adapter.dynamic_table(model, graph))) }}
{% endmacro %}
