"""The rows a deletion vector masks, read from its descriptor in the log: the positions it holds,
decoded with ``pyroaring``, at a cost that follows the rows deleted rather than the file's rows
(``deltalake`` hands a vector out as one flag per row of its file: 10M flags for a 10M-row file;
docs/ARCHITECTURE.md, "Reading sources").

A descriptor (Delta protocol, "Deletion Vector Descriptor Schema") stores the vector inline
(``i``: Z85 text), in a file beside the table named by a UUID (``u``: an optional folder prefix
and the UUID in Z85), or at a path (``p``). Stored in a file, it sits at ``offset`` as its size
(4 bytes, big-endian), the vector, and its CRC-32 (4 bytes, big-endian). A vector is the magic
number 1681511377 (4 bytes, little-endian) and a 64-bit Roaring bitmap in the portable format."""

from __future__ import annotations

import base64
import struct
import uuid
import zlib
from typing import Any, Callable, Mapping, Optional

import numpy as np
from pyroaring import BitMap64

from dbt.adapters.dyntable.delta_log.errors import DeltaLogError

_PORTABLE_MAGIC = 1681511377
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_BASE85 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"
#: Z85 and Python's base 85 encode the same way with other alphabets.
_Z85_TO_BASE85 = str.maketrans(_Z85, _BASE85)


class DeletionVectorUnreadable(DeltaLogError):
    """A deletion vector the log names is missing, damaged or in a form this reader does not know."""


def vector_file(descriptor: Mapping[str, Any], root: str) -> Optional[str]:
    """Where a vector stored in a file is, under the table's ``root`` URI; None for an inline one."""
    kind, stored = descriptor.get("storageType"), str(descriptor.get("pathOrInlineDv") or "")
    if kind == "u":
        prefix, encoded = stored[:-20], stored[-20:]
        name = f"deletion_vector_{uuid.UUID(bytes=_z85_decode(encoded))}.bin"
        return f"{root}/{prefix}/{name}" if prefix else f"{root}/{name}"
    if kind == "p":
        return stored
    if kind == "i":
        return None
    raise DeletionVectorUnreadable(f"a deletion vector of storage type {kind!r} is not one Delta defines")


def positions(
    descriptor: Mapping[str, Any], root: str, read: Callable[[str], Optional[bytes]]
) -> "np.ndarray[Any, Any]":
    """The sorted positions of the rows ``descriptor``'s vector masks, its file read by ``read``
    (None when the file is gone) under the table's ``root`` URI."""
    where = vector_file(descriptor, root)
    if where is None:
        vector = _z85_decode(str(descriptor["pathOrInlineDv"]))
    else:
        vector = _stored_vector(where, int(descriptor.get("offset") or 0), read)
    if len(vector) < 4 or struct.unpack_from("<i", vector)[0] != _PORTABLE_MAGIC:
        raise DeletionVectorUnreadable(
            f"the deletion vector in {where or 'the log'} is not a portable Roaring bitmap"
        )
    try:
        masked = BitMap64.deserialize(vector[4:])
    except (ValueError, OverflowError) as exc:
        raise DeletionVectorUnreadable(
            f"the deletion vector in {where or 'the log'} is damaged: {exc}"
        ) from exc
    found = np.fromiter(masked, dtype=np.int64, count=len(masked))
    cardinality = descriptor.get("cardinality")
    if cardinality is not None and len(found) != int(cardinality):
        raise DeletionVectorUnreadable(
            f"the deletion vector in {where or 'the log'} masks {len(found)} rows "
            f"where the log says {cardinality}"
        )
    return found


def _stored_vector(where: str, offset: int, read: Callable[[str], Optional[bytes]]) -> bytes:
    """The vector at ``offset`` of the file ``where``, its checksum verified."""
    data = read(where)
    if data is None:
        raise DeletionVectorUnreadable(f"the deletion vector file {where} is gone")
    if len(data) < offset + 4:
        raise DeletionVectorUnreadable(f"the deletion vector file {where} ends before offset {offset}")
    (size,) = struct.unpack_from(">i", data, offset)
    vector = data[offset + 4 : offset + 4 + size]
    checksum = data[offset + 4 + size : offset + 8 + size]
    if len(vector) != size or len(checksum) != 4 or struct.unpack(">I", checksum)[0] != zlib.crc32(vector):
        raise DeletionVectorUnreadable(
            f"the deletion vector at offset {offset} of {where} is damaged (checksum)"
        )
    return vector


def _z85_decode(text: str) -> bytes:
    try:
        return base64.b85decode(text.translate(_Z85_TO_BASE85))
    except ValueError as exc:
        raise DeletionVectorUnreadable(f"a deletion vector's name {text!r} is not Z85: {exc}") from exc
