"""Delta log metadata read straight from a table's location, without asking an engine.

A refresh first asks "did any source change?" and "which version was current at T?". Asking the
engine costs a query each; reading the transaction log costs a directory listing. That is what makes
a NO_DATA refresh nearly free (docs/ARCHITECTURE.md, "Reading sources"), so this package answers
those questions from the log alone, through :class:`DeltaLog`, which composes one reader per part:

* :mod:`.current_listing`, :mod:`.listing`, :mod:`.object_listing`: versions, from listing
  ``_delta_log`` (no snapshot is loaded), reused and extended while the log only gains commits;
* :mod:`.commits` and :mod:`.timeline`: what each commit did, its identity, and commit timestamps;
* :mod:`.snapshots` and :mod:`.deltalake_snapshots`: snapshots (schema, table id, configuration,
  live files) from the ``deltalake`` package, or from an earlier one and the commits after it when
  those only add and remove files;
* :mod:`.intervals`: an :class:`Interval` ``(v0, v1]``, the difference of the two snapshots' file
  sets checked against the interval's own commits.

Reading the rows of an interval's files is the job of :mod:`dbt.adapters.dyntable.changes`.
"""

from dbt.adapters.dyntable.delta_log.current_listing import note_write
from dbt.adapters.dyntable.delta_log.errors import (
    CommitUnreadable,
    DeltaLogError,
    HistoryUnavailable,
    TableNotFound,
)
from dbt.adapters.dyntable.delta_log.intervals import REPLACE_OPERATIONS
from dbt.adapters.dyntable.delta_log.listing import FolderStamp, folder_stamp, folder_unchanged
from dbt.adapters.dyntable.delta_log.log import DeltaLog
from dbt.adapters.dyntable.delta_log.model import DataFile, Interval, IntervalKind, Snapshot
from dbt.adapters.dyntable.delta_log.protocol import (
    CHANGE_DATA_FEED,
    CHECKPOINT_FILE,
    CHECKPOINT_INTERVAL,
    COLUMN_MAPPING_MODE,
    COMMIT_FILE,
    DEFAULT_CHECKPOINT_INTERVAL,
    DELETION_VECTOR_FEATURES,
    DELETION_VECTORS,
    LAST_CHECKPOINT,
    LOG_DIR,
    commit_file,
)
from dbt.adapters.dyntable.delta_log.schema import schema_change, typed_partition_values, without_comments

__all__ = [
    "CHANGE_DATA_FEED",
    "CHECKPOINT_FILE",
    "CHECKPOINT_INTERVAL",
    "COLUMN_MAPPING_MODE",
    "COMMIT_FILE",
    "DEFAULT_CHECKPOINT_INTERVAL",
    "DELETION_VECTORS",
    "DELETION_VECTOR_FEATURES",
    "LAST_CHECKPOINT",
    "LOG_DIR",
    "REPLACE_OPERATIONS",
    "CommitUnreadable",
    "DataFile",
    "DeltaLog",
    "DeltaLogError",
    "FolderStamp",
    "HistoryUnavailable",
    "Interval",
    "IntervalKind",
    "Snapshot",
    "TableNotFound",
    "commit_file",
    "folder_stamp",
    "folder_unchanged",
    "note_write",
    "schema_change",
    "typed_partition_values",
    "without_comments",
]
