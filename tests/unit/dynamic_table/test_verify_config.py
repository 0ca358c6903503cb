"""The `verify`, `cluster_by` and `auto_compact` configs (docs/ARCHITECTURE.md, "Verifying",
"Table features", "Compaction"), and comments being no schema change."""

from __future__ import annotations

import pytest

from dbt.adapters.dyntable.delta_log import schema_change, without_comments
from dbt.adapters.dyntable.dynamic_table.config import DynamicTableConfig, DynamicTableConfigError


def config(**extra):
    return DynamicTableConfig.from_model("m", {"target_lag": "1 minute", **extra})


def test_verify_is_off_by_default_and_errors_on_mismatch():
    assert config().verify is None and config().verify_failure == "error"
    assert config(verify="FULL", verify_failure="warn").verify == "full"
    assert config(verify="sample").verify_failure == "error"
    assert config(verify=False).verify is None


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"verify": "always"}, "Model 'm': verify 'always' is not valid. Use sample | full."),
        ({"verify": True}, "Model 'm': verify True is not valid. Use sample | full."),
        ({"verify_failure": "ignore"}, "Model 'm': verify_failure 'ignore' is not valid. Use error | warn."),
        (
            {"auto_compact": "yes"},
            "Model 'm': auto_compact 'yes' is not valid. Use true (compact once a partition holds 50 "
            "small files), false (never), or a whole number of files, 2 or more.",
        ),
        (
            {"auto_compact": 1},
            "Model 'm': auto_compact 1 is not valid. Use true (compact once a partition holds 50 "
            "small files), false (never), or a whole number of files, 2 or more.",
        ),
        (
            {"cluster_by": "a", "partition_by": "b"},
            "Model 'm': cluster_by and partition_by are both set. Delta liquid clustering replaces "
            "partitioning: keep one of them.",
        ),
    ],
)
def test_bad_values_name_the_model_and_the_fix(extra, message):
    with pytest.raises(DynamicTableConfigError) as raised:
        config(**extra)
    assert str(raised.value) == message


def test_auto_compact_is_on_at_delta_s_default_and_takes_a_number_of_files():
    assert config().compact_after_files == 50 == config(auto_compact=True).compact_after_files
    assert config(auto_compact=False).compact_after_files is None
    assert config(auto_compact=10).compact_after_files == 10


def test_cluster_by_takes_a_column_or_a_list():
    assert config(cluster_by="a").cluster_by == ("a",)
    assert config(cluster_by=["a", "b"]).cluster_by == ("a", "b")


def test_a_comment_is_no_schema_change():
    before = {"type": "struct", "fields": [{"name": "a", "type": "long", "nullable": True, "metadata": {}}]}
    after = {
        "type": "struct",
        "fields": [{"name": "a", "type": "long", "nullable": True, "metadata": {"comment": "the id"}}],
    }
    assert without_comments(before) == without_comments(after)
    assert without_comments(after)["fields"][0]["metadata"] == {}
    retyped = {
        "type": "struct",
        "fields": [{"name": "a", "type": "string", "nullable": True, "metadata": {}}],
    }
    assert without_comments(retyped) != without_comments(after)
    assert "a" in schema_change(before, retyped)
