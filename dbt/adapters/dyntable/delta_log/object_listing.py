"""An object store's ``_delta_log``, listed from the version a reader needs on, with a request
per thousand files, and extended from its latest commit on where this process listed it before:
the cost does not grow with the log's history (docs/ARCHITECTURE.md, "Object storage")."""

from __future__ import annotations

import json
from typing import Dict, Iterable, List, Optional

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.delta_log.listing import LISTING_CACHE_SIZE, Listing
from dbt.adapters.dyntable.delta_log.lru import Lru
from dbt.adapters.dyntable.delta_log.protocol import CHECKPOINT_FILE, COMMIT_FILE, LAST_CHECKPOINT, LOG_DIR
from dbt.adapters.dyntable.delta_log.table_files import TableFiles

#: An object store's listings, by log folder: extended by one request listing from the latest
#: commit on (docs/ARCHITECTURE.md, "Object storage").
_object_listings: "Lru[str, Listing]" = Lru(LISTING_CACHE_SIZE)


def list_objects(files: TableFiles, since: Optional[int]) -> Listing:
    """The log of a table in an object store, listed with one request where this process
    listed it before (from its latest commit on) or the caller named the version it needs
    (``since``, from there on); else from its last checkpoint on."""
    folder = f"{files.location}/{LOG_DIR}"
    cached = _object_listings.get(folder)
    listing = None
    if cached is not None and cached.last_commit is not None:
        listing = _object_extended(files.store, folder, cached)
    if listing is None and since is not None:
        listing = _object_listing(files.store, folder, since)
    if listing is None:
        listing = _object_listing(files.store, folder, _last_checkpoint_version(files.store, folder))
    if listing is None:
        listing = _object_listing(files.store, folder, None)
    assert listing is not None  # a listing of everything always answers
    _object_listings.put(folder, listing)
    return listing


def list_objects_from(files: TableFiles, version: Optional[int]) -> Listing:
    """The log listed from ``version`` on (None: whole), kept for the process."""
    folder = f"{files.location}/{LOG_DIR}"
    listing = _object_listing(files.store, folder, version) or _object_listing(files.store, folder, None)
    assert listing is not None
    _object_listings.put(folder, listing)
    return listing


def _object_listing(store: storage.Storage, folder: str, start: Optional[int]) -> Optional[Listing]:
    """The files of ``folder`` from version ``start`` on (None: all); None when ``start``'s
    commit is not there (gone, or never written)."""
    files = store.files(folder, after=None if start is None else f"{start:020d}")
    listing = _object_files_listing(files, start)
    if start is not None and start not in listing.commit_mtimes_ms:
        return None
    return listing


def _object_extended(store: storage.Storage, folder: str, cached: Listing) -> Optional[Listing]:
    """``cached`` with the commits written since, from one request listing from its latest
    commit on; None when that commit is gone or written anew (a table re-created)."""
    last = cached.last_commit
    assert last is not None
    files = store.files(folder, after=f"{last:020d}")
    newer = _object_files_listing(files, last)
    if newer.tags.get(last) != cached.tags.get(last) or last not in newer.commit_mtimes_ms:
        return None
    start = cached.complete_from
    if newer.last_checkpoint_tag != cached.last_checkpoint_tag:
        # A checkpoint, after which expired commits may be cleaned up: what was listed
        # before the newest checkpoint may be gone.
        start = max(start or 0, newer.checkpoints[-1]) if newer.checkpoints else start
    kept = {v: t for v, t in cached.commit_mtimes_ms.items() if start is None or v >= start}
    tags = {v: t for v, t in cached.tags.items() if start is None or v >= start}
    checkpoints = sorted(
        {c for c in cached.checkpoints if start is None or c >= start} | set(newer.checkpoints)
    )
    return Listing(
        {**kept, **newer.commit_mtimes_ms},
        tuple(checkpoints),
        newer.last_checkpoint_ns,
        start,
        {**tags, **newer.tags},
        newer.last_checkpoint_tag,
    )


def _last_checkpoint_version(store: storage.Storage, folder: str) -> Optional[int]:
    """The version ``_last_checkpoint`` names; None without one, or one that does not parse."""
    raw = store.read(f"{folder}/{LAST_CHECKPOINT}")
    try:
        return int(json.loads(raw)["version"]) if raw else None
    except (ValueError, KeyError, TypeError):
        return None


def _object_files_listing(files: Iterable[storage.ObjectInfo], start: Optional[int]) -> Listing:
    """A :class:`Listing` of an object store's log files (listed from version ``start`` on)."""
    commits: Dict[int, int] = {}
    tags: Dict[int, str] = {}
    checkpoints: List[int] = []
    hint_ns, hint_tag = None, None
    for found in files:
        if match := COMMIT_FILE.match(found.name):
            version = int(match.group(1))
            commits[version] = found.mtime_ns // 1_000_000
            tags[version] = found.tag
        elif match := CHECKPOINT_FILE.match(found.name):
            checkpoints.append(int(match.group(1)))
        elif found.name == LAST_CHECKPOINT:
            hint_ns, hint_tag = found.mtime_ns, found.tag
    return Listing(commits, tuple(sorted(set(checkpoints))), hint_ns, start, tags, hint_tag)
