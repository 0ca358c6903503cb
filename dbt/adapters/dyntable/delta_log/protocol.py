"""The Delta protocol's names this package reads a log by: its files, and the table properties."""

from __future__ import annotations

import re

LOG_DIR = "_delta_log"
#: Rewritten by every checkpoint, before the cleanup of expired commits that follows one.
LAST_CHECKPOINT = "_last_checkpoint"


def commit_file(version: int) -> str:
    """The path of ``version``'s commit, relative to the table's root."""
    return f"{LOG_DIR}/{version:020d}.json"


COMMIT_FILE = re.compile(r"^(\d{20})\.json$")
#: Classic, multi-part (`.checkpoint.0000000001.0000000003.parquet`) and V2 (`.checkpoint.<uuid>.json`).
CHECKPOINT_FILE = re.compile(r"^(\d{20})\.checkpoint(?:\.[^.]+|\.\d{10}\.\d{10})?\.(?:parquet|json)$")
COLUMN_MAPPING_MODE = "delta.columnMapping.mode"
#: The table setting that has MERGE, DELETE and UPDATE mark removed rows in deletion vectors.
DELETION_VECTORS = "delta.enableDeletionVectors"
#: The writer features a table carries once deletion vectors are enabled on it (the other two come
#: with the writer protocol 7 that table features need).
DELETION_VECTOR_FEATURES = frozenset({"deletionVectors", "appendOnly", "invariants"})
CHANGE_DATA_FEED = "delta.enableChangeDataFeed"
CHECKPOINT_INTERVAL = "delta.checkpointInterval"
#: Delta's default checkpoint interval, which delta-spark and Sail follow (deltalake's is 100).
DEFAULT_CHECKPOINT_INTERVAL = 10
