{#
  The dynamic_table materialization. The decision between create, reinitialize, apply a lag
  change, continue with the old definition or fail (dbt-snowflake's switch) is taken in Python by
  adapter.refresh_dynamic_table, from the DT's frontier and definition hash.
#}
{% materialization dynamic_table, adapter='dyntable' %}
  {%- set target_relation = this.incorporate(type='table') -%}
  {%- do adapter.validate_dynamic_table_config(model.name, config.model.config) -%}

  {{ run_hooks(pre_hooks) }}

  {%- set result = adapter.refresh_dynamic_table(
        target_relation, compiled_code, config.model.config, should_full_refresh(),
        run_started_at, model.name, graph, model.unique_id) -%}

  {% call noop_statement('main', result['message'], result['state'], result['rows']) %}
    -- {{ result['action'] }}: {{ result['reason'] }}
  {% endcall %}

  {{ run_hooks(post_hooks) }}
  {% do persist_docs(target_relation, model) %}
  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}
