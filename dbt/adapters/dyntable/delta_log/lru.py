"""The bounded map the log's caches are kept in: a runner over thousands of tables does not keep
what it read of each for its lifetime."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, Iterator, Optional, TypeVar

_Key = TypeVar("_Key")
_Value = TypeVar("_Value")


class Lru(Generic[_Key, _Value]):
    """A map that keeps its ``size`` most recently used entries; safe across threads."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: "OrderedDict[_Key, _Value]" = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: _Key) -> Optional[_Value]:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: _Key, value: _Value) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            if len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def pop(self, key: _Key) -> Optional[_Value]:
        with self._lock:
            return self._entries.pop(key, None)

    def __iter__(self) -> Iterator[_Key]:
        with self._lock:
            return iter(list(self._entries))
