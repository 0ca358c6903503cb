"""Deletion vectors read from their descriptors (``delta_log.deletion_vectors``) and the rows a
snapshot's vectors mask, read when asked (``DeletedRows``). The vectors here are written as the
Delta protocol lays them out; those the engines write are read by the functional tests
(``test_change_extraction``, ``lifecycle/test_deletion_vectors``) against time travel."""

from __future__ import annotations

import base64
import struct
import uuid
import zlib
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import pytest
from pyroaring import BitMap64

from dbt.adapters.dyntable.delta_log.deletion_vectors import DeletionVectorUnreadable, positions, vector_file
from dbt.adapters.dyntable.delta_log.model import DeletedRows
from dbt.adapters.dyntable.delta_log.table_files import TableFiles

Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
BASE85 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"
ROWS = [0, 7, 65_536, 9_999_999, 2**32 + 3]


def z85(data: bytes) -> str:
    return base64.b85encode(data).decode().translate(str.maketrans(BASE85, Z85))


def vector(rows: List[int]) -> bytes:
    return struct.pack("<i", 1681511377) + BitMap64(rows).serialize()


def stored(root: Path, rows: List[int], prefix: str = "ab") -> Dict[str, object]:
    """A vector in a file of its own, after one other vector, as a writer lays it out."""
    name = uuid.uuid4()
    folder = root / prefix if prefix else root
    folder.mkdir(parents=True, exist_ok=True)
    other, mine = vector([1]), vector(rows)
    framed = [struct.pack(">i", len(v)) + v + struct.pack(">I", zlib.crc32(v)) for v in (other, mine)]
    (folder / f"deletion_vector_{name}.bin").write_bytes(b"\x01" + framed[0] + framed[1])
    return {
        "storageType": "u",
        "pathOrInlineDv": prefix + z85(name.bytes),
        "offset": 1 + len(framed[0]),
        "sizeInBytes": len(mine),
        "cardinality": len(rows),
    }


def read(location: str) -> Optional[bytes]:
    path = Path(location)
    return path.read_bytes() if path.exists() else None


@pytest.mark.parametrize("prefix", ["ab", ""])
def test_a_vector_in_a_file_beside_the_table(tmp_path: Path, prefix: str) -> None:
    descriptor = stored(tmp_path, ROWS, prefix)
    assert Path(str(vector_file(descriptor, str(tmp_path)))).parent == (
        tmp_path / prefix if prefix else tmp_path
    )
    assert positions(descriptor, str(tmp_path), read).tolist() == ROWS


def test_an_inline_vector_and_one_at_a_path(tmp_path: Path) -> None:
    inline = {"storageType": "i", "pathOrInlineDv": z85(vector(ROWS)), "sizeInBytes": 0, "cardinality": 5}
    assert positions(inline, str(tmp_path), read).tolist() == ROWS
    at_path = dict(stored(tmp_path, [3, 4]), storageType="p")
    at_path["pathOrInlineDv"] = str(vector_file(dict(at_path, storageType="u"), str(tmp_path)))
    assert positions(at_path, "elsewhere", read).tolist() == [3, 4]


def test_a_damaged_missing_or_miscounted_vector_says_which_and_why(tmp_path: Path) -> None:
    descriptor = stored(tmp_path, ROWS)
    where = Path(str(vector_file(descriptor, str(tmp_path))))
    with pytest.raises(DeletionVectorUnreadable, match="masks 5 rows where the log says 6"):
        positions(dict(descriptor, cardinality=6), str(tmp_path), read)
    data = bytearray(where.read_bytes())
    data[int(descriptor["offset"]) + 12] ^= 0xFF  # type: ignore[call-overload]
    where.write_bytes(bytes(data))
    with pytest.raises(DeletionVectorUnreadable, match=f"{where}.*damaged"):
        positions(descriptor, str(tmp_path), read)
    where.unlink()
    with pytest.raises(DeletionVectorUnreadable, match=f"{where} is gone"):
        positions(descriptor, str(tmp_path), read)
    with pytest.raises(DeletionVectorUnreadable, match="storage type 'x'"):
        positions(dict(descriptor, storageType="x"), str(tmp_path), read)


def test_deleted_rows_read_only_what_is_asked() -> None:
    """The paths a snapshot's commits set answer from their own vectors; the rest of the
    table's are loaded once, for every snapshot built on from it, when a path not set is asked."""
    reads: List[str] = []

    def reading(name: str, rows: List[int]):  # noqa: ANN202
        def read_vector() -> np.ndarray:
            reads.append(name)
            return np.array(rows, np.int64)

        return read_vector

    base = DeletedRows(
        rest=lambda: reads.append("every vector") or {"old": np.array([1]), "gone": np.array([2])}
    )  # type: ignore[func-returns-value]
    later = base.updated({"new": reading("new", [4]), "plain": None}, live=["old", "new", "plain"])
    assert later.get("plain") is None and "plain" not in later
    assert later["new"].tolist() == [4] and later["new"].tolist() == [4]
    assert reads == ["new"]  # read once, and nothing else
    assert later["old"].tolist() == [1] and base["old"].tolist() == [1]
    assert reads == ["new", "every vector"]  # the loader ran once, for both
    assert sorted(later) == ["new", "old"] and "gone" in base and "gone" not in later
    newer = later.updated({"new": None}, live=["old", "new"])
    assert sorted(newer) == ["old"] and newer.get("new") is None and newer.get("gone") is None
    assert reads == ["new", "every vector"]


def test_a_table_reads_its_vectors_beside_it_and_at_a_file_uri(tmp_path: Path) -> None:
    files = TableFiles(tmp_path)
    descriptor = stored(tmp_path, [3, 4])
    assert files.masked_rows(descriptor).tolist() == [3, 4]
    where = Path(str(vector_file(descriptor, str(tmp_path))))
    assert files.masked_rows(dict(descriptor, storageType="p", pathOrInlineDv=where.as_uri())).tolist() == [
        3,
        4,
    ]
