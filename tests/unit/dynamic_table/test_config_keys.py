"""A key a dynamic table does not know warns, naming the closest one it knows; dbt's and
dbt-spark's own model configs are known (README, "Config")."""

from __future__ import annotations

from dbt.artifacts.resources.v1.model import ModelConfig

from dbt.adapters.dyntable.dynamic_table.config import DynamicTableConfig
from dbt.adapters.dyntable.dynamic_table.model import dbt_config_keys


def warnings_of(config: dict) -> tuple:
    return DynamicTableConfig.from_model(
        "m", {"target_lag": "1 minute", **config}, dbt_config_keys()
    ).warnings


def test_a_misspelled_key_names_the_closest_one():
    said = warnings_of({"refresh_mod": "full", "uniqe_key": "id", "partiton_by": "day"})
    assert said == (
        "Model 'm': config key 'partiton_by' is not one dbt-dyntable or dbt knows, and is ignored "
        "(did you mean 'partition_by'?).",
        "Model 'm': config key 'refresh_mod' is not one dbt-dyntable or dbt knows, and is ignored "
        "(did you mean 'refresh_mode'?).",
        "Model 'm': config key 'uniqe_key' is not one dbt-dyntable or dbt knows, and is ignored "
        "(did you mean 'unique_key'?).",
    )


def test_a_key_like_none_lists_what_a_dynamic_table_takes():
    [said] = warnings_of({"zzz": 1})
    assert "config key 'zzz'" in said and "a dynamic table takes auto_compact, backfill_from" in said


def test_dbt_s_and_dbt_spark_s_own_configs_do_not_warn():
    node_config = ModelConfig(materialized="dynamic_table", tags=["x"], meta={"a": 1}).to_dict()
    spark = {"file_format": "delta", "location_root": "/x", "tblproperties": {}, "options": {}, "buckets": 2}
    dyntable = {
        "verify": "full",
        "immutable_where": "d < current_date()",
        "cluster_by": ["a"],
        "auto_compact": 5,
    }
    assert warnings_of({**node_config, **spark, **dyntable, "sql_header": "set x = 1"}) == ()
