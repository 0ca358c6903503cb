"""Project settings every functional test uses: Delta for models, seeds and snapshots.

Spark's default table format is parquet; the plugin keeps everything in Delta, as dbt-spark's own
tests configure their Delta suites.
"""

from typing import Any, Dict

DELTA: Dict[str, Any] = {
    "models": {"+file_format": "delta"},
    "seeds": {"+file_format": "delta"},
    "snapshots": {"+file_format": "delta"},
}


def delta_project(name: str | None = None, **extra: Any) -> Dict[str, Any]:
    """A `project_config_update` with Delta everywhere, keeping the base suite's project name."""
    config: Dict[str, Any] = {key: dict(value) for key, value in DELTA.items()}
    if name:
        config["name"] = name
    for key, value in extra.items():
        if isinstance(value, dict) and key in config:
            config[key].update(value)
        else:
            config[key] = value
    return config
