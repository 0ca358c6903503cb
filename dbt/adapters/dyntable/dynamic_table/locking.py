"""One refresh of a dynamic table at a time, across processes.

An exclusive `flock` on ``<root>/<name>.lock``; the holder writes who it is into the file so a
second runner can say what holds the lock. The OS releases the lock when a process dies, so a
crashed refresh never leaves a DT locked.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Optional, Type


class RefreshLocked(RuntimeError):
    """Another process is refreshing this dynamic table."""

    def __init__(self, name: str, holder: str) -> None:
        super().__init__(f"it is being refreshed by {holder}; try again when it ends.")
        self.name = name
        self.holder = holder


class RefreshLock:
    def __init__(self, root: Path, name: str) -> None:
        self.name = name
        self.path = root / f"{name}.lock"
        self._handle: Optional[IO[str]] = None

    def acquire(self) -> "RefreshLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = describe_holder(handle.read())
            handle.close()
            raise RefreshLocked(self.name, holder) from None
        handle.seek(0)
        handle.truncate()
        handle.write(
            json.dumps(
                {
                    "pid": os.getpid(),
                    "host": socket.gethostname(),
                    "command": " ".join(os.path.basename(a) for a in sys.argv[:2]),
                    "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                }
            )
        )
        handle.flush()
        self._handle = handle
        return self

    def release(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            handle.close()

    def __enter__(self) -> "RefreshLock":
        return self.acquire()

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.release()


def describe_holder(text: str) -> str:
    try:
        info = json.loads(text)
    except ValueError:
        return "another process"
    return (
        f"process {info.get('pid')} on {info.get('host')} ({info.get('command')}, since {info.get('since')})"
    )
