{#
  A generic test for `dbt build`: the dynamic table equals its query at its data timestamp
  (docs/ARCHITECTURE.md, "Verifying"). It fails with one row naming the mismatch.
    models:
      - name: orders_by_day
        data_tests:
          - dynamic_table_matches_query          # or: {mode: sample}
#}
{% test dynamic_table_matches_query(model, mode='full') %}
  {{ adapter.dynamic_table_test_sql(model, mode, graph) }}
{% endtest %}
