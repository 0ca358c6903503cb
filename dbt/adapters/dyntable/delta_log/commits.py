"""A table's commits: what each did (its actions, as far as differentiation needs them), its
identity and its in-commit timestamp, each commit read and parsed once per reader."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

from dbt.adapters.dyntable.delta_log.current_listing import CurrentListing
from dbt.adapters.dyntable.delta_log.errors import CommitUnreadable, HistoryUnavailable
from dbt.adapters.dyntable.delta_log.listing import LISTING_CACHE_SIZE
from dbt.adapters.dyntable.delta_log.lru import Lru
from dbt.adapters.dyntable.delta_log.table_files import TableFiles
from dbt.adapters.dyntable.vocabulary import fingerprint

#: Actions a commit may hold and still be applied to the previous snapshot by ``Snapshots._applied``:
#: none of them changes the table's metadata, protocol or domain metadata (clustering columns).
FILE_ONLY_ACTIONS = frozenset({"commitInfo", "add", "remove", "txn", "cdc"})
#: The operation metrics that count the rows an UPDATE, DELETE or MERGE changed.
_CHANGED_ROW_METRICS = (
    "numUpdatedRows",
    "numDeletedRows",
    "numTargetRowsInserted",
    "numTargetRowsUpdated",
    "numTargetRowsDeleted",
)
#: Commit identities read from an object store, by location, version and the object's tag: a
#: commit is read once per process (an object's tag changes with its bytes).
_object_commit_ids: "Lru[Tuple[str, int, str], str]" = Lru(LISTING_CACHE_SIZE * 16)
#: In-commit timestamps read from an object store, kept as the identities are.
_object_commit_icts: "Lru[Tuple[str, int, str], Tuple[Optional[int]]]" = Lru(LISTING_CACHE_SIZE * 16)


@dataclass(frozen=True)
class FileActions:
    """The files a commit adds (its ``add`` actions) and removes (their paths)."""

    added: Tuple[Mapping[str, Any], ...]
    removed: Tuple[str, ...]


@dataclass
class Commit:
    """The actions of one commit file that matter for differentiation."""

    version: int
    identity: str
    """A digest of the commit file: two commits with the same version number are the same commit
    only if their identities are equal (a re-created table writes new ones)."""
    commit_info: Mapping[str, Any]
    metadata: Optional[Mapping[str, Any]]
    changes_data: bool
    """Some add/remove action has ``dataChange`` true (compaction commits have none)."""
    added_vectors: Dict[str, Optional[Mapping[str, Any]]] = field(default_factory=dict)
    """Per path of a file it adds, the descriptor of the file's deletion vector (None for none)."""
    removed_vectors: Dict[str, Optional[Mapping[str, Any]]] = field(default_factory=dict)
    """Per path of a file it removes, the descriptor of the deletion vector the file had (None
    for none): a remove names the logical file it removes by its path and vector (Delta
    protocol, "Deletion Vectors")."""
    touches_files: bool = False
    """The commit has add or remove actions."""
    file_actions: Optional["FileActions"] = None
    """Its adds and removes when they are all it changes (:data:`FILE_ONLY_ACTIONS`); None when
    it changes more."""

    removes_files: bool = False
    """The commit has a ``remove`` action that changes data."""

    @property
    def deletion_vector_paths(self) -> List[str]:
        """The files it adds or removes with a deletion vector."""
        paths = [p for vectors in (self.added_vectors, self.removed_vectors) for p, v in vectors.items() if v]
        return list(dict.fromkeys(paths))

    @property
    def operation(self) -> str:
        return str(self.commit_info.get("operation") or "")

    @property
    def metrics(self) -> Dict[str, int]:
        """The row and file counts its writer recorded in ``commitInfo.operationMetrics``, by
        delta-spark's names (``numTargetRowsInserted``, ...): delta-spark writes them as text,
        Sail as numbers, and delta-rs in snake case (``num_target_rows_inserted``)."""
        metrics = self.commit_info.get("operationMetrics") or {}
        return {
            _camel_case(name): int(value)
            for name, value in metrics.items()
            if str(value).lstrip("-").isdigit()
        }

    @property
    def rows_added_and_removed(self) -> Optional[Tuple[int, int]]:
        """The rows this commit added and removed, an updated row being one of each: what its
        writer says it inserted, updated and deleted (UPDATE, DELETE and MERGE metrics), or, for
        a commit that only adds files, the rows it wrote. None when it recorded neither, as where
        an overwrite removes files without counting their rows."""
        if not self.changes_data:
            return 0, 0
        metrics = self.metrics
        if any(name in metrics for name in _CHANGED_ROW_METRICS):
            updated = metrics.get("numUpdatedRows", 0) + metrics.get("numTargetRowsUpdated", 0)
            inserted = metrics.get("numTargetRowsInserted", 0)
            deleted = metrics.get("numDeletedRows", 0) + metrics.get("numTargetRowsDeleted", 0)
            return inserted + updated, deleted + updated
        written = metrics.get("numOutputRows", metrics.get("numAddedRows"))
        return None if self.removes_files or written is None else (written, 0)

    @property
    def changed_rows(self) -> Optional[int]:
        """The rows this commit removed or added (:attr:`rows_added_and_removed`)."""
        rows = self.rows_added_and_removed
        return None if rows is None else sum(rows)

    @property
    def rearranges(self) -> bool:
        """Rewrites files without changing rows (a compaction: every action ``dataChange`` false)."""
        return self.touches_files and not self.changes_data


def _camel_case(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)


def parse_commit(location: str, version: int, raw: bytes) -> Commit:
    """The commit of ``version`` from its file's bytes; :class:`CommitUnreadable` if they do not
    parse."""
    text = raw.decode("utf-8")
    identity = fingerprint(raw)
    commit = Commit(version=version, identity=identity, commit_info={}, metadata=None, changes_data=False)
    added: List[Mapping[str, Any]] = []
    removed: List[str] = []
    file_only = True
    try:
        # One parse per commit, not one per action: a long run of small commits is parsed
        # whole by an interval (docs/ARCHITECTURE.md, "Reading sources").
        actions = json.loads("[" + ",".join(line for line in text.splitlines() if line.strip()) + "]")
    except ValueError as exc:
        raise CommitUnreadable(
            f"{location}: the commit of version {version} is not valid JSON (truncated or corrupt: {exc})."
        ) from exc
    for action in actions:
        file_only = file_only and FILE_ONLY_ACTIONS.issuperset(action)
        if "commitInfo" in action:
            commit.commit_info = action["commitInfo"] or {}
        elif "metaData" in action:
            commit.metadata = action["metaData"]
        for kind in ("add", "remove"):
            file_action = action.get(kind)
            if file_action is None:
                continue
            # The protocol defaults dataChange to true where a writer leaves it out.
            commit.touches_files = True
            commit.changes_data |= bool(file_action.get("dataChange", True))
            vector = file_action.get("deletionVector") or None
            if kind == "add":
                added.append(file_action)
                commit.added_vectors[file_action["path"]] = vector
            else:
                removed.append(file_action["path"])
                commit.removed_vectors[file_action["path"]] = vector
                commit.removes_files |= bool(file_action.get("dataChange", True))
    if file_only:
        commit.file_actions = FileActions(tuple(added), tuple(removed))
    return commit


class Commits:
    """One table's commits as one reader reads them: parsed, identified and timestamped once each,
    by version. A table re-created at its location reuses version numbers: :meth:`forget`."""

    def __init__(self, files: TableFiles, listing: CurrentListing) -> None:
        self._files = files
        self._listing = listing
        self._raw: Dict[int, bytes] = {}
        self._parsed: Dict[int, Commit] = {}
        self._icts: Dict[int, Optional[int]] = {}
        self._ids: Dict[int, str] = {}

    def forget(self) -> None:
        """Drop what is kept by version: the table was re-created, its versions name other commits."""
        self._parsed.clear()
        self._icts.clear()
        self._ids.clear()

    def read(self, version: int) -> Commit:
        """``version``'s commit, parsed; :class:`HistoryUnavailable` if its file is gone."""
        cached = self._parsed.get(version)
        if cached is not None:
            return cached
        commit = parse_commit(self._files.location, version, self._bytes(version))
        self._parsed[version] = commit
        return commit

    def between(self, v0: int, v1: int) -> Iterator[Commit]:
        """The commits of ``(v0, v1]``, in order."""
        for version in range(v0 + 1, v1 + 1):
            yield self.read(version)

    def all_read(self, v0: int, v1: int) -> bool:
        """Whether every commit of ``(v0, v1]`` is held parsed."""
        return all(v in self._parsed for v in range(v0 + 1, v1 + 1))

    def commit_id(self, version: int) -> str:
        """The identity of ``version``'s commit (see :attr:`Commit.identity`);
        :class:`HistoryUnavailable` if its commit file is gone. A digest of its bytes: nothing
        is parsed."""
        parsed = self._parsed.get(version)
        if parsed is not None:
            return parsed.identity
        if version not in self._ids:
            self._ids[version] = self._object_commit_id(version) or fingerprint(self._bytes(version))
        return self._ids[version]

    def _object_commit_id(self, version: int) -> Optional[str]:
        """An object store's commit identity as this process read it before, while the listing
        shows the same object (by its tag); None where there is none to go by. The commit is
        read (and its identity kept) otherwise."""
        if not self._files.remote:
            return None
        tag = self._listing.get().tags.get(version)
        if not tag:
            return None
        key = (self._files.location, version, tag)
        known = _object_commit_ids.get(key)
        if known is None:
            known = fingerprint(self._bytes(version))
            _object_commit_ids.put(key, known)
        return known

    def in_commit_timestamp(self, version: int) -> Optional[int]:
        """The commit's in-commit timestamp. Where a table records them, commitInfo is its
        commits' first action (Delta protocol, "In-Commit Timestamps"): one line is parsed, not
        the compaction's thousands of file actions."""
        if version not in self._icts and self._files.remote:
            known = _object_commit_icts.get(
                (self._files.location, version, self._listing.get().tags.get(version, ""))
            )
            if known is not None:
                self._icts[version] = known[0]
        if version not in self._icts:
            parsed = self._parsed.get(version)
            if parsed is not None:
                value = parsed.commit_info.get("inCommitTimestamp")
            else:
                first = self._bytes(version).split(b"\n", 1)[0]
                info = (json.loads(first).get("commitInfo") if first.strip() else None) or {}
                value = info.get("inCommitTimestamp")
            self._icts[version] = int(value) if value is not None else None
            tag = self._listing.get().tags.get(version) if self._files.remote else None
            if tag:
                _object_commit_icts.put((self._files.location, version, tag), (self._icts[version],))
        return self._icts[version]

    def lost_commit(self, version: int, commit: str) -> Optional[str]:
        """Why this log no longer holds ``commit`` at ``version`` (None when it does): the table
        was re-created or rewritten, its log ends before that version, or the entry is gone."""
        if not commit:
            return f"version {version} was consumed before commit identities were recorded"
        latest = self._listing.latest_version()
        if version > latest:
            return (
                f"its log ends at version {latest}, before the consumed version {version} "
                "(re-created, or its log lost commits)"
            )
        try:
            found = self.commit_id(version)
        except HistoryUnavailable:
            return f"the log entry of the consumed version {version} is gone (cleaned up)"
        if found != commit:
            return f"its version {version} is not the commit consumed (the table was re-created or rewritten)"
        return None

    def data_change_after(self, version: int) -> Optional[str]:
        """The first commit after ``version`` that changed the table's rows, described; None if
        none did (compaction commits rewrite files, not rows)."""
        try:
            changed = self.first_data_change_after(version)
        except HistoryUnavailable as exc:
            return str(exc)
        if changed is None:
            return None
        return f"version {changed} ({self.read(changed).operation or 'a write'})"

    def first_data_change_after(self, version: int) -> Optional[int]:
        """The first version after ``version`` whose commit changed rows; None if none did.
        :class:`HistoryUnavailable` if a commit between is gone."""
        for commit in self.between(version, self._listing.latest_version()):
            if commit.changes_data:
                return commit.version
        return None

    def _bytes(self, version: int) -> bytes:
        if self._files.remote:
            raw = self._raw.get(version)
            if raw is None:
                raw = self._raw[version] = self._files.read_commit(version)
            return raw
        return self._files.read_commit(version)
