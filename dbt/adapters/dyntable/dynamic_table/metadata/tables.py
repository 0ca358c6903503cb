"""The three metadata tables: their names, columns and log settings, and what their damage is."""

from __future__ import annotations

from typing import Dict

import pyarrow as pa
from deltalake.exceptions import DeltaError

from dbt.adapters.dyntable.delta_log import CHECKPOINT_INTERVAL, DEFAULT_CHECKPOINT_INTERVAL

FRONTIERS = "dynamic_table_frontiers"
REFRESH_HISTORY = "dynamic_table_refresh_history"
GRAPH_HISTORY = "dynamic_table_graph_history"
#: The small tables every refresh reads, kept in memory per Delta version.
CACHED_TABLES = (FRONTIERS, GRAPH_HISTORY)

TS = pa.timestamp("us", tz="UTC")

SCHEMAS: Dict[str, pa.Schema] = {
    FRONTIERS: pa.schema(
        [
            ("name", pa.string()),
            ("data_timestamp", TS),
            ("source_versions", pa.string()),
            ("sources", pa.string()),
            ("dt_version", pa.int64()),
            ("dt_commit", pa.string()),
            ("definition_hash", pa.string()),
            ("refresh_mode", pa.string()),
            ("definition", pa.string()),
            ("pending", pa.string()),
            ("updated_at", TS),
            ("views", pa.string()),
        ]
    ),
    REFRESH_HISTORY: pa.schema(
        [
            ("name", pa.string()),
            ("refresh_id", pa.string()),
            ("data_timestamp", TS),
            ("state", pa.string()),
            ("state_message", pa.string()),
            ("refresh_action", pa.string()),
            ("refresh_trigger", pa.string()),
            ("reason", pa.string()),
            ("refresh_start_time", TS),
            ("refresh_end_time", TS),
            ("rows_inserted", pa.int64()),
            ("rows_deleted", pa.int64()),
            ("source_versions", pa.string()),
            ("dt_version", pa.int64()),
            ("dt_commit", pa.string()),
            ("immutable_rows_ignored", pa.int64()),
            ("verified", pa.string()),
            ("source_rows_read", pa.int64()),
            ("source_files_read", pa.int64()),
        ]
    ),
    GRAPH_HISTORY: pa.schema(
        [
            ("name", pa.string()),
            ("recorded_at", TS),
            ("inputs", pa.string()),
            ("target_lag", pa.string()),
            ("effective_target_lag_seconds", pa.int64()),
            ("scheduling_state", pa.string()),
            ("consecutive_failures", pa.int64()),
            ("definition_hash", pa.string()),
            ("refresh_mode", pa.string()),
            ("accept_change", pa.bool_()),
        ]
    ),
}

#: The metadata tables keep no log history of their own (their rows are the history): each 10th
#: commit (Delta's default interval) writes a checkpoint and removes the commits before it. Opening
#: a table, or checking an open one for new commits, replays the commits since its last checkpoint:
#: 2.8 ms with 44 of them against 0.5 ms right after one (docs/ARCHITECTURE.md, "Metadata tables").
#: A reader whose next commit was removed reads the table afresh (``OpenTables.table``).
LOG_SETTINGS = {
    CHECKPOINT_INTERVAL: str(DEFAULT_CHECKPOINT_INTERVAL),
    "delta.logRetentionDuration": "interval 0 seconds",
}
#: The columns that tell one row of each table from the others (a write that failed after its
#: commit landed is found by them).
ROW_KEYS = {
    FRONTIERS: ("name", "updated_at", "data_timestamp"),
    REFRESH_HISTORY: ("name", "refresh_id", "refresh_trigger", "state"),
    GRAPH_HISTORY: ("name", "recorded_at"),
}


class MetadataDamaged(RuntimeError):
    """A metadata table that cannot be read or written, named with the way out."""

    def __init__(self, table: str, location: str, detail: str) -> None:
        self.table = table
        self.detail = detail
        super().__init__(
            f"The metadata table {table} ({location}) is damaged: {detail}. Run `dyntable repair` "
            "to rebuild it from what can still be read (a dynamic table whose frontier is lost or "
            "older than its data is recomputed at its next refresh), or restore the folder from a "
            "backup."
        )


#: What reading or writing a damaged Delta table raises: a bad log (DeltaError), a bad or missing
#: data file (Arrow), a file gone from under the reader (OSError).
DAMAGE_ERRORS = (DeltaError, pa.ArrowException, OSError)
NO_LOG = "it holds data files but no Delta log (_delta_log)"
