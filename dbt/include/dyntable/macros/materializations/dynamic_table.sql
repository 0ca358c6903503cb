{#
  The dynamic_table materialization. The model's config is validated before anything runs; the
  decision between create, reinitialize, apply a lag change, continue with the old definition or
  fail (dbt-snowflake's switch) is taken in Python by the refresh's decide stage, from the DT's
  frontier, definition hash and sources (docs/ARCHITECTURE.md). The refresh also writes the
  comments persist_docs asks for; grants are dbt's, where the engine has them ("Table features").
#}
{% materialization dynamic_table, adapter='dyntable' %}
  {%- set target_relation = this.incorporate(type='table') -%}
  {%- set dynamic_table = adapter.dynamic_table(model, graph) -%}

  {#- dbt compiles a macro at its first call in a process: a cost the first model would pay. -#}
  {% if pre_hooks %}{{ run_hooks(pre_hooks) }}{% endif %}

  {%- set result = adapter.refresh_dynamic_table(dynamic_table, graph, selected_resources) -%}

  {#- What noop_statement does, without compiling it in the first model of a process. -#}
  {%- do write('-- ' ~ result['action'] ~ ': ' ~ result['reason']) -%}
  {%- do store_raw_result('main', message=result['message'], code=result['state'], rows_affected=result['rows']) -%}

  {%- set grant_config = config.get('grants') -%}
  {% if grant_config and adapter.grants_apply(dynamic_table) %}
    {% do apply_grants(target_relation, grant_config, should_revoke=True) %}
  {% endif %}

  {% if post_hooks %}{{ run_hooks(post_hooks) }}{% endif %}
  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}
