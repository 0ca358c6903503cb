{#-
  A negative part counts from the end: element_at() does that itself. dbt-spark computes the index
  with an expression inside [], which Sail refuses ("extraction must be a literal"); it also
  counted delimiters by length, which is wrong for delimiters longer than one character.
  Non-negative parts are dbt-spark's.
-#}
{% macro dyntable__split_part(string_text, delimiter_text, part_number) %}
    {%- if part_number >= 0 -%}
        {{ return(spark__split_part(string_text, delimiter_text, part_number)) }}
    {%- endif -%}
    {% set delimiter_expr %}
        -- escape if starts with a special character
        case when regexp_extract({{ delimiter_text }}, '([^A-Za-z0-9])(.*)', 1) != '_'
            then concat('\\', {{ delimiter_text }})
            else {{ delimiter_text }} end
    {% endset %}
    {% set split_part_expr %}
        element_at(split({{ string_text }}, {{ delimiter_expr }}), {{ part_number }})
    {% endset %}
    {{ return(split_part_expr) }}
{% endmacro %}
