"""Which reads of a table at a version go to its data files rather than to the engine's Delta
scan (``VersionedRelations``; docs/ARCHITECTURE.md, "Engines"). Reading both ways is tested on
the engines in tests/functional/test_change_extraction.py."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

import numpy as np
import pytest

from dbt.adapters.dyntable.changes import VersionedRelations
from dbt.adapters.dyntable.delta_log import DataFile, Snapshot
from dbt.adapters.dyntable.engines.base import Capabilities

CAPABILITIES = Capabilities(
    change_data_feed=True, truncate=False, alter_table_columns=True, persistent_catalog=True
)


@dataclass
class Log:
    """The two things VersionedRelations asks of a table's log."""

    files: int
    checkpoint: Optional[int] = None
    min_reader_version: int = 1
    root: str = "file:///t"
    reader_features: tuple = ()
    #: Files whose deletion vector masks a row.
    masked: int = 0
    #: The checkpoint a listing taken now finds (a writer added one since the refresh observed).
    checkpoint_now: Optional[int] = None

    def latest_checkpoint(self, now: bool = False) -> Optional[int]:
        return self.checkpoint_now if now and self.checkpoint_now is not None else self.checkpoint

    def snapshot(self, version: int) -> Snapshot:
        files = {
            f"part-{i}.parquet": DataFile(f"part-{i}.parquet", f"{self.root}/part-{i}.parquet", 10, 1, {})
            for i in range(self.files)
        }
        return Snapshot(
            version,
            "t",
            '{"type": "struct", "fields": []}',
            (),
            {},
            files,
            deleted_rows={f"part-{i}.parquet": np.array([0]) for i in range(self.masked)},
            min_reader_version=self.min_reader_version,
            reader_features=self.reader_features,
        )


@pytest.mark.parametrize(
    "capabilities, log, version, from_files",
    [
        pytest.param(CAPABILITIES, Log(files=1), 3, False, id="time_travel_by_default"),
        pytest.param(replace(CAPABILITIES, versions_from_files=32), Log(files=32), 3, True, id="few_files"),
        pytest.param(replace(CAPABILITIES, versions_from_files=32), Log(files=33), 3, False, id="many_files"),
        pytest.param(
            replace(CAPABILITIES, versions_from_files=32),
            Log(files=1, root="s3://bucket/t"),
            3,
            False,
            id="object_store",  # Spark would look each file up with a request
        ),
        pytest.param(
            replace(CAPABILITIES, versions_from_files=32),
            Log(files=1, min_reader_version=3),
            3,
            False,
            id="reader_features",  # deletion vectors, column mapping: the files are not the rows
        ),
        pytest.param(
            replace(CAPABILITIES, versions_from_files=32),
            Log(files=2, min_reader_version=3, reader_features=("deletionVectors",)),
            3,
            True,
            id="deletion_vectors_enabled_none_written",  # a dynamic table's: its files are its rows
        ),
        pytest.param(
            replace(CAPABILITIES, versions_from_files=32),
            Log(files=2, min_reader_version=3, reader_features=("deletionVectors",), masked=1),
            3,
            False,
            id="a_deletion_vector_written",
        ),
        pytest.param(
            replace(CAPABILITIES, time_travel_behind_checkpoint=False),
            Log(files=100, checkpoint=10, min_reader_version=3),
            3,
            True,
            id="behind_a_checkpoint_sail_cannot_read",
        ),
        pytest.param(
            replace(CAPABILITIES, time_travel_behind_checkpoint=False),
            Log(files=100, checkpoint=10),
            10,
            False,
            id="at_the_checkpoint",
        ),
        pytest.param(
            replace(CAPABILITIES, time_travel_behind_checkpoint=False),
            Log(files=100, checkpoint=None, checkpoint_now=20),
            12,
            True,
            id="behind_a_checkpoint_written_since_the_refresh_observed_the_table",
        ),
    ],
)
def test_which_versions_are_read_from_their_files(capabilities, log, version, from_files):
    relations = VersionedRelations(spark=None, capabilities=capabilities)  # type: ignore[arg-type]
    assert relations._from_files(log, version) is from_files  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "capabilities, log, from_files",
    [
        pytest.param(replace(CAPABILITIES, versions_from_files=32), Log(files=1), False, id="few_files"),
        pytest.param(
            replace(CAPABILITIES, time_travel_behind_checkpoint=False),
            Log(files=1, checkpoint=10),
            True,
            id="behind_a_checkpoint_sail_cannot_read",
        ),
    ],
)
def test_sql_a_model_keeps_reads_from_files_only_what_time_travel_cannot(capabilities, log, from_files):
    """``dyntable_consistent`` hands its SQL to models, views among them: a view may not name a
    temp view, so a version the engine reads is ``VERSION AS OF``, however small."""
    relations = VersionedRelations(spark=None, capabilities=capabilities, outlives_session=True)  # type: ignore[arg-type]
    assert relations._from_files(log, 3) is from_files  # type: ignore[arg-type]
