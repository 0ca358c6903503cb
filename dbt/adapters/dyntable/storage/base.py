"""The interface of a warehouse's files, whatever holds them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import pyarrow.fs as pafs


@dataclass(frozen=True)
class ObjectInfo:
    """One listed file: its name (relative to the folder listed), modification time and tag (an
    object's ETag; a local file's size and modification time)."""

    name: str
    mtime_ns: int
    tag: str
    size: int = 0


class Storage(ABC):
    """A warehouse's files: a local folder (:class:`LocalStorage`) or an object store
    (:class:`ObjectStorage`). Paths are locations: an absolute local path, or a URL."""

    #: Whether files live in an object store (no rename, no flock, no folder modification time).
    remote: bool = False

    def __init__(self, root: str) -> None:
        self.root = root

    def join(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *(p.strip("/") for p in parts)])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.root!r})"

    @abstractmethod
    def read(self, location: str) -> Optional[bytes]:
        """The file's bytes; None when it does not exist."""

    @abstractmethod
    def write(self, location: str, data: bytes) -> None:
        """Write the file whole: a reader sees the old bytes or the new ones, never a part."""

    @abstractmethod
    def delete(self, location: str) -> None:
        """Delete the file; nothing when it does not exist."""

    @abstractmethod
    def delete_tree(self, location: str) -> None:
        """Delete the folder and everything under it."""

    @abstractmethod
    def folders(self, location: str) -> List[str]:
        """The names of the folders directly under ``location`` (none when it does not exist)."""

    @abstractmethod
    def files(self, location: str, after: Optional[str] = None) -> List[ObjectInfo]:
        """The files directly under ``location``, sorted by name; with ``after``, only those
        whose name sorts after it (an object store lists from there on: one request)."""

    @abstractmethod
    def make_folder(self, location: str) -> None:
        """Create the folder (an object store has none to create)."""

    @abstractmethod
    def walk(self, location: str) -> List[str]:
        """Every file under ``location``, in every folder below it."""

    @abstractmethod
    def move_tree(self, location: str, to: str) -> None:
        """Move the folder and everything under it to ``to`` (an object store copies each file)."""

    @abstractmethod
    def arrow(self, location: str) -> Tuple[pafs.FileSystem, str]:
        """Arrow's file system for ``location`` and the path on it."""

    @abstractmethod
    def delta_options(self) -> Dict[str, str]:
        """``storage_options`` for ``deltalake``."""

    def engine_environment(self) -> Dict[str, str]:
        """The environment variables the embedded engine (Sail) reads its settings from."""
        return {}

    def uri(self, location: str) -> str:
        """``location`` as a URI an engine reads (``file:///...`` for a local one)."""
        return location

    def is_table(self, location: str) -> bool:
        """Whether a Delta log with a commit is at ``location``."""
        return any(f.name.endswith(".json") for f in self.files(f"{location.rstrip('/')}/_delta_log"))

    def contains(self, location: str) -> bool:
        """Whether ``location`` lies under this warehouse's root."""
        root = self.root.rstrip("/") + "/"
        return location.rstrip("/").startswith(root)
