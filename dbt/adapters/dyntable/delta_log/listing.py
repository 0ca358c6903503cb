"""A listing of a table's ``_delta_log`` (its commits, checkpoints and ``_last_checkpoint``), and
how a local log's listing is taken once and reused or extended while the log only gains commits
(docs/ARCHITECTURE.md, "Reading sources"); an object store's is :mod:`.object_listing`'s."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple, Union

import pyarrow.fs as pafs

from dbt.adapters.dyntable.delta_log.lru import Lru
from dbt.adapters.dyntable.delta_log.protocol import CHECKPOINT_FILE, COMMIT_FILE, LAST_CHECKPOINT, LOG_DIR
from dbt.adapters.dyntable.delta_log.table_files import TableFiles

#: A local ``_delta_log``'s listing is reused while the folder is the same one with the same
#: modification time, and that time is older than this before the listing was taken: a folder
#: changed within the same tick of a coarse clock would otherwise look unchanged (git's index
#: treats such entries as "racily clean" the same way). Otherwise a few stats extend it by the
#: commits written since (:func:`_extended`). A source with a month of commits holds
#: thousands of files, and a refresh asks for its versions several times (docs/ARCHITECTURE.md,
#: "Reading sources").
LISTING_RACY_NS = 2_000_000_000
#: New commits a listing is extended by, one stat each, before the log is listed again instead.
PROBED_COMMITS = 64
#: Listings kept, least recently used dropped first: one per source a process reads, so a runner
#: over a warehouse of thousands of tables does not keep every log's listing for its lifetime.
LISTING_CACHE_SIZE = 256

#: A local folder's device, inode and modification time (ns).
FolderStamp = Tuple[int, int, int]


def folder_stamp(folder: Union[str, Path]) -> Optional[FolderStamp]:
    """A local folder's :data:`FolderStamp`; None when it cannot be read."""
    try:
        found = os.stat(folder)
    except OSError:
        return None
    return (found.st_dev, found.st_ino, found.st_mtime_ns)


def folder_unchanged(stamp: Optional[FolderStamp], seen: FolderStamp, seen_at_ns: int) -> bool:
    """Whether a folder stamped ``seen`` at ``seen_at_ns`` (``time.time_ns``) holds the same
    files now that it is stamped ``stamp``: the same folder, last modified at the same time, and
    that time older than :data:`LISTING_RACY_NS` before ``seen_at_ns``."""
    return stamp == seen and seen[2] < seen_at_ns - LISTING_RACY_NS


@dataclass(frozen=True)
class Listing:
    """One listing of ``_delta_log``: commit files with their modification times."""

    commit_mtimes_ms: Mapping[int, int]
    checkpoints: Tuple[int, ...]
    last_checkpoint_ns: Optional[int] = None
    """``_last_checkpoint``'s modification time, None without one."""
    complete_from: Optional[int] = None
    """Listed from this version on (an object store's log is listed from a version it needs,
    not whole); None: every file was listed."""
    tags: Mapping[int, str] = field(default_factory=dict)
    """Per commit, its object's tag (an object store's ETag): a commit written anew has another."""
    last_checkpoint_tag: Optional[str] = None

    # Computed once: a log keeps up to tens of thousands of commits, and a refresh asks for its
    # latest version a dozen times.
    @cached_property
    def first_commit(self) -> Optional[int]:
        return min(self.commit_mtimes_ms) if self.commit_mtimes_ms else None

    @cached_property
    def last_commit(self) -> Optional[int]:
        return max(self.commit_mtimes_ms) if self.commit_mtimes_ms else None

    @cached_property
    def latest(self) -> Optional[int]:
        versions = [v for v in (self.last_commit, *self.checkpoints[-1:]) if v is not None]
        return max(versions) if versions else None

    @property
    def earliest_loadable(self) -> Optional[int]:
        """The first version a snapshot can be rebuilt for: 0 while its commit exists, else the
        oldest checkpoint (commits before it were cleaned up)."""
        if self.complete_from is not None:
            return self.complete_from
        if 0 in self.commit_mtimes_ms:
            return 0
        if self.checkpoints:
            return min(self.checkpoints)
        return self.first_commit


#: Listings kept for the process, by log folder, with the folder's stamp and when it was taken.
_listings: "Lru[str, Tuple[FolderStamp, int, Listing]]" = Lru(LISTING_CACHE_SIZE)


def list_local(files: TableFiles) -> Listing:
    """A local (or Arrow file system's) log, listed: reused while its folder is unchanged, else
    extended by the commits written since (:func:`_extended`), else listed anew."""
    folder = f"{files.folder}/{LOG_DIR}"
    listed_at = time.time_ns()
    stamp = folder_stamp(folder) if files.local else None
    if stamp is not None:
        cached = _listings.get(folder)
        if cached is not None and cached[0][:2] == stamp[:2]:
            if folder_unchanged(stamp, cached[0], cached[1]):
                return cached[2]
            extended = _extended(files.fs, folder, cached[2])
            if extended is not None:
                _listings.put(folder, (stamp, listed_at, extended))
                return extended
    try:
        infos = files.fs.get_file_info(pafs.FileSelector(folder))
    except FileNotFoundError:
        return Listing({}, ())
    commits: Dict[int, int] = {}
    checkpoints: List[int] = []
    last_checkpoint_ns = None
    for info in infos:
        if match := COMMIT_FILE.match(info.base_name):
            commits[int(match.group(1))] = _mtime_ms(info)
        elif match := CHECKPOINT_FILE.match(info.base_name):
            checkpoints.append(int(match.group(1)))
        elif info.base_name == LAST_CHECKPOINT:
            last_checkpoint_ns = info.mtime_ns
    listing = Listing(commits, tuple(sorted(set(checkpoints))), last_checkpoint_ns)
    if stamp is not None:
        _listings.put(folder, (stamp, listed_at, listing))
    return listing


def _extended(fs: pafs.FileSystem, folder: str, listing: Listing) -> Optional[Listing]:
    """``listing`` with the commits written since it was taken, from a few stats; None when
    only a new listing can tell what changed.

    Commits are written in version order: the new ones follow its latest, up to the first
    missing. What else changes a log goes with a change these stats see: a checkpoint, and
    the cleanup of expired commits after one, rewrite ``_last_checkpoint``; a cleanup run by
    hand removes the earliest commit; a table re-created in the folder wrote its latest
    commit anew. A table written every minute keeps tens of thousands of commits, and a DT
    gains one with each refresh (docs/ARCHITECTURE.md, "Reading sources")."""
    if listing.first_commit is None or listing.last_commit is None:
        return None
    first, last, hint = fs.get_file_info(
        [
            f"{folder}/{listing.first_commit:020d}.json",
            f"{folder}/{listing.last_commit:020d}.json",
            f"{folder}/{LAST_CHECKPOINT}",
        ]
    )
    if (
        first.type == pafs.FileType.NotFound
        or last.type == pafs.FileType.NotFound
        or _mtime_ms(last) != listing.commit_mtimes_ms[listing.last_commit]
        or (None if hint.type == pafs.FileType.NotFound else hint.mtime_ns) != listing.last_checkpoint_ns
    ):
        return None
    added: Dict[int, int] = {}
    while len(added) < PROBED_COMMITS:
        version = listing.last_commit + len(added) + 1
        info = fs.get_file_info(f"{folder}/{version:020d}.json")
        if info.type == pafs.FileType.NotFound:
            if not added:
                return listing
            commits = {**listing.commit_mtimes_ms, **added}
            return Listing(commits, listing.checkpoints, listing.last_checkpoint_ns)
        added[version] = _mtime_ms(info)
    return None


def _mtime_ms(info: pafs.FileInfo) -> int:
    return info.mtime_ns // 1_000_000 if info.mtime_ns else 0
