"""A warehouse in a local folder: the file system calls the adapter always made."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pyarrow.fs as pafs

from dbt.adapters.dyntable.storage.base import ObjectInfo, Storage


class LocalStorage(Storage):
    """A folder on this machine's file system: the calls the adapter always made."""

    def __init__(self, root: str) -> None:
        super().__init__(str(root))

    def read(self, location: str) -> Optional[bytes]:
        try:
            return Path(location).read_bytes()
        except FileNotFoundError:
            return None

    def write(self, location: str, data: bytes) -> None:
        folder = Path(location).parent
        folder.mkdir(parents=True, exist_ok=True)
        # Write then rename, so a crash never leaves half a file behind.
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, location)

    def delete(self, location: str) -> None:
        Path(location).unlink(missing_ok=True)

    def delete_tree(self, location: str) -> None:
        shutil.rmtree(location, ignore_errors=True)

    def folders(self, location: str) -> List[str]:
        path = Path(location)
        if not path.is_dir():
            return []
        return sorted(p.name for p in path.iterdir() if p.is_dir())

    def files(self, location: str, after: Optional[str] = None) -> List[ObjectInfo]:
        try:
            entries = list(os.scandir(location))
        except (FileNotFoundError, NotADirectoryError):
            return []
        found = []
        for entry in entries:
            if not entry.is_file() or (after is not None and entry.name <= after):
                continue
            stat = entry.stat()
            found.append(
                ObjectInfo(entry.name, stat.st_mtime_ns, f"{stat.st_size}:{stat.st_mtime_ns}", stat.st_size)
            )
        return sorted(found, key=lambda f: f.name)

    def is_table(self, location: str) -> bool:
        log = Path(location) / "_delta_log"
        return log.is_dir() and any(log.glob("*.json"))

    def make_folder(self, location: str) -> None:
        Path(location).mkdir(parents=True, exist_ok=True)

    def walk(self, location: str) -> List[str]:
        return sorted(str(p) for p in Path(location).rglob("*") if p.is_file())

    def move_tree(self, location: str, to: str) -> None:
        Path(to).parent.mkdir(parents=True, exist_ok=True)
        Path(location).rename(to)

    def arrow(self, location: str) -> Tuple[pafs.FileSystem, str]:
        return LOCAL_FILESYSTEM, location

    def delta_options(self) -> Dict[str, str]:
        return {}

    def uri(self, location: str) -> str:
        return Path(location).as_uri()

    def contains(self, location: str) -> bool:
        return Path(self.root) in Path(location).resolve().parents


LOCAL_FILESYSTEM = pafs.LocalFileSystem()
