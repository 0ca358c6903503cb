"""A table's files: where they are, how the paths its log records resolve there, which are gone."""

from __future__ import annotations

import re
import urllib.parse
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import pyarrow.fs as pafs

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.delta_log import deletion_vectors
from dbt.adapters.dyntable.delta_log.errors import HistoryUnavailable
from dbt.adapters.dyntable.delta_log.model import DataFile, Positions, ValueRange
from dbt.adapters.dyntable.delta_log.protocol import commit_file


class TableFiles:
    """A table's location, the storage holding it and, for Arrow, its file system and folder."""

    def __init__(self, location: Union[str, Path]) -> None:
        text = str(location)
        if "://" not in text and not text.startswith("file:"):
            text = str(Path(text).expanduser().resolve())
        self.location = storage.normalized(text.rstrip("/"))
        self.store = storage.of(self.location)
        self.remote = self.store.remote
        self.fs, folder = storage.arrow(self.location)
        self.folder = folder.rstrip("/")
        self.local = isinstance(self.fs, pafs.LocalFileSystem)
        self.root_uri = Path(self.folder).as_uri() if self.local else self.location

    def read_commit(self, version: int) -> bytes:
        """The bytes of ``version``'s commit file; :class:`HistoryUnavailable` if it is gone."""
        if self.remote:
            # One request (Arrow's input stream asks for the object's size first).
            found = self.store.read(f"{self.location}/{commit_file(version)}")
            if found is None:
                raise HistoryUnavailable(f"{self.location}: the commit of version {version} is gone.")
            return found
        path = f"{self.folder}/{commit_file(version)}"
        try:
            if self.local:  # a quarter of Arrow's stream's cost
                with open(path, "rb") as local:
                    return local.read()
            with self.fs.open_input_stream(path) as stream:
                return bytes(stream.read())
        except FileNotFoundError as exc:
            raise HistoryUnavailable(f"{self.location}: the commit of version {version} is gone.") from exc

    def file_uri(self, log_path: str) -> str:
        """Log paths are URI-encoded and relative to the root unless they carry a scheme."""
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", log_path):
            return log_path
        return f"{self.root_uri}/{log_path}"

    def data_file(
        self,
        path: str,
        size: Any,
        records: Any,
        partition_values: Mapping[str, Any],
        ranges: Optional[Mapping[str, ValueRange]] = None,
    ) -> DataFile:
        """A live file from what the log records of it (``deltalake``'s add actions or the
        commit's own): its path as recorded, size, row count (None without statistics) and its
        columns' value ranges."""
        return DataFile(
            path=path,
            uri=self.file_uri(path),
            size_bytes=int(size),
            num_records=None if records is None else int(records),
            partition_values=dict(partition_values),
            ranges=dict(ranges or {}),
        )

    def masked_rows(self, vector: Mapping[str, Any]) -> Positions:
        """The positions of the rows the deletion vector ``vector`` (its descriptor) masks."""
        return deletion_vectors.positions(vector, self.location, self._read_file)

    def _read_file(self, location: str) -> Optional[bytes]:
        """The bytes of a file beside the table's log, or at an absolute location a descriptor
        names (a ``file:`` URI or a path; another store's URL); None when it is not there."""
        if location.startswith(self.location + "/"):
            return self.store.read(location)
        if location.startswith("file:"):
            location = urllib.parse.unquote(urllib.parse.urlsplit(location).path)
        return storage.of(location).read(storage.normalized(location))

    def file_path(self, data_file: DataFile) -> Tuple[pafs.FileSystem, str]:
        """The file system holding ``data_file`` and its path there."""
        if data_file.uri.startswith(self.root_uri + "/"):
            relative = urllib.parse.unquote(data_file.uri[len(self.root_uri) + 1 :])
            return self.fs, f"{self.folder}/{relative}"
        return storage.arrow(data_file.uri)

    def missing_files(self, files: Tuple[DataFile, ...]) -> List[DataFile]:
        """Files whose data is gone; one batched metadata call per file system."""
        by_fs: Dict[int, Tuple[pafs.FileSystem, List[Tuple[str, DataFile]]]] = {}
        for data_file in files:
            fs, path = self.file_path(data_file)
            by_fs.setdefault(id(fs), (fs, []))[1].append((path, data_file))
        missing: List[DataFile] = []
        for fs, entries in by_fs.values():
            infos = fs.get_file_info([path for path, _ in entries])
            missing.extend(f for info, (_, f) in zip(infos, entries) if info.type == pafs.FileType.NotFound)
        return missing
