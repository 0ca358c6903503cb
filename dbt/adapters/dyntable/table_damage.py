"""What is damaged in a Delta table's own files, in words (docs/ARCHITECTURE.md, "Damage").

A refresh that fails, `dbt run --full-refresh` and `dyntable repair` ask :func:`damage` of a table:
its log read afresh, without the snapshots this process shares (a table damaged since they were
loaded reads whole from them), and its live files looked up. What it names is what a user can
check by hand: the checkpoint ``_last_checkpoint`` points to, each commit after it (present,
contiguous, valid JSON), the log loading whole, and the data files the latest version lists.
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Dict, List, Optional, Tuple

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from dbt.adapters.dyntable import storage
from dbt.adapters.dyntable.delta_log import CHECKPOINT_FILE, COMMIT_FILE, LAST_CHECKPOINT, LOG_DIR
from dbt.adapters.dyntable.vocabulary import first_line

#: Live files looked up per batch (one metadata call each on a local disk or an object store).
FILES_PER_LOOKUP = 1000


def damage(location: str) -> Optional[str]:
    """What is wrong with the Delta table at ``location``; None when its latest version loads
    whole and every file it lists is there. A location without a log is no table: None."""
    if storage.is_url(location):
        filesystem, root = storage.arrow(location)
    else:  # a local path, which may hold what a URI would have to escape
        filesystem, root = pafs.LocalFileSystem(), location.removeprefix("file:")
    root = root.rstrip("/")
    try:
        infos = filesystem.get_file_info(pafs.FileSelector(f"{root}/{LOG_DIR}"))
    except FileNotFoundError:
        return None
    commits = sorted(int(m.group(1)) for i in infos if (m := COMMIT_FILE.match(i.base_name)))
    checkpoints: Dict[int, List[str]] = {}
    for info in infos:
        if match := CHECKPOINT_FILE.match(info.base_name):
            checkpoints.setdefault(int(match.group(1)), []).append(info.path)
    hint = next((i.path for i in infos if i.base_name == LAST_CHECKPOINT), None)
    if not commits and not checkpoints:
        return None
    found, checkpoint = _checkpoint(filesystem, hint, checkpoints)
    if found is not None:
        return found
    found = _commits_after(filesystem, root, commits, checkpoint)
    if found is not None:
        return found
    try:
        uris = storage.delta_table(location).file_uris()
    except Exception as exc:  # noqa: BLE001 - whatever stops the log loading is the damage
        return f"its Delta log does not load ({first_line(exc)})"
    return _missing_files(uris)


def _checkpoint(
    filesystem: pafs.FileSystem, hint: Optional[str], checkpoints: Dict[int, List[str]]
) -> Tuple[Optional[str], Optional[int]]:
    """The damage of the checkpoint a reader starts from (``_last_checkpoint``'s, else the
    newest), or None and that checkpoint's version (None: readers start from version 0)."""
    version: Optional[int] = max(checkpoints) if checkpoints else None
    if hint is not None:
        try:
            with filesystem.open_input_stream(hint) as stream:
                version = int(json.loads(bytes(stream.read()))["version"])
        except (ValueError, KeyError, TypeError) as exc:
            return f"its {LAST_CHECKPOINT} file is not valid ({first_line(exc)})", None
    if version is None:
        return None, None
    if version not in checkpoints:
        return f"the checkpoint of version {version}, which {LAST_CHECKPOINT} names, is missing", None
    for path in checkpoints[version]:
        if not path.endswith(".parquet"):
            continue  # a V2 checkpoint's JSON: the log's own load checks it
        try:
            pq.read_metadata(path, filesystem=filesystem)
        except Exception as exc:  # noqa: BLE001 - any read failure is a corrupt file
            return f"its checkpoint of version {version} is corrupt ({first_line(exc)})", None
    return None, version


def _commits_after(
    filesystem: pafs.FileSystem, root: str, commits: List[int], checkpoint: Optional[int]
) -> Optional[str]:
    """The damage of the commits a reader replays after ``checkpoint``: each must be there, in
    order, and valid JSON lines."""
    start = 0 if checkpoint is None else checkpoint + 1
    needed = [v for v in commits if v >= start]
    expected = list(range(start, (needed[-1] + 1) if needed else start))
    missing = sorted(set(expected) - set(needed))
    if missing:
        after = "its start" if checkpoint is None else f"its checkpoint of version {checkpoint}"
        return f"the commit of version {missing[0]} is missing (a reader replays every commit after {after})"
    for version in needed:
        path = f"{root}/{LOG_DIR}/{version:020d}.json"
        with filesystem.open_input_stream(path) as stream:
            text = bytes(stream.read()).decode("utf-8", errors="replace")
        try:
            for line in text.splitlines():
                if line.strip():
                    json.loads(line)
        except ValueError as exc:
            return f"the commit of version {version} is truncated or corrupt ({first_line(exc)})"
    return None


def _missing_files(uris: List[str]) -> Optional[str]:
    """How many of the live files ``uris`` name are gone, with one of them."""
    missing: List[str] = []
    for start in range(0, len(uris), FILES_PER_LOOKUP):
        batch = uris[start : start + FILES_PER_LOOKUP]
        filesystem, _ = storage.arrow(batch[0])
        paths = [storage.arrow(uri)[1] for uri in batch]
        infos = filesystem.get_file_info(paths)
        missing += [uri for uri, info in zip(batch, infos) if info.type == pafs.FileType.NotFound]
    if not missing:
        return None
    example = urllib.parse.unquote(missing[0].rsplit("/", 1)[-1])
    return (
        f"{len(missing)} of the {len(uris)} data files its latest version lists are missing (e.g. {example})"
    )
