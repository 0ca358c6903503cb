"""The models of user_cost's dbt project: each DT shape of data.py twice (refresh_mode incremental
and full), the headline shape in HEADLINE_COPIES copies, and the join written by hand as a
dbt-spark `merge` incremental model."""

from __future__ import annotations

from typing import Dict, Iterable

from benchmarks.data import SHAPES
from benchmarks.fact_project import with_sources
from benchmarks.user_cost.parameters import HAND_WRITTEN, HEADLINE, HEADLINE_COPIES, dt_model

#: On JVM Spark, where every refresh costs seconds, the project keeps the join + group-by DT (once),
#: its full twin and the join DT the hand-written model is written after.
JVM_MODELS = {(HEADLINE, "incremental"), (HEADLINE, "full"), ("join", "incremental")}


def models_for(engine: str) -> Dict[str, str]:
    """Model name → SQL file."""
    models: Dict[str, str] = {}
    for shape, sql in SHAPES.items():
        for mode in ("incremental", "full"):
            if engine == "jvm" and (shape, mode) not in JVM_MODELS:
                continue
            copies = (
                HEADLINE_COPIES if (shape, mode) == (HEADLINE, "incremental") and engine == "embedded" else 1
            )
            for copy in range(1, copies + 1):
                config = f"materialized='dynamic_table', target_lag='1 minute', refresh_mode='{mode}'"
                models[dt_model(shape, mode, copy)] = (
                    f"{{{{ config({config}) }}}}\n{with_sources(sql).strip()}\n"
                )
    merge = "materialized='incremental', incremental_strategy='merge', unique_key='id'"
    models[HAND_WRITTEN] = (
        f"{{{{ config({merge}) }}}}\n"
        "-- benchmarks/hand_written.py's model: the join DT's query, merged above its id watermark\n"
        f"{with_sources(SHAPES['join']).strip()}\n"
        "{% if is_incremental() %}\n  and f.id > (select max(id) from {{ this }})\n{% endif %}\n"
    )
    return models


def actions_after_a_change(dynamic_tables: Iterable[str]) -> Dict[str, str]:
    """The action each of the project's DTs must take after rows are inserted into the fact."""
    return {m: "FULL" if "_full" in m else "INCREMENTAL" for m in dynamic_tables}
