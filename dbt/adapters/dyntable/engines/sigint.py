"""Ctrl-C in a process that runs Sail's server (docs/ARCHITECTURE.md, "Interrupting a run").

Sail's in-process server stops itself on SIGINT: it waits on tokio's ``ctrl_c``, whose handler
replaces the process's SIGINT action at the C level, once per process, a few milliseconds after
the server starts. That handler still calls Python's, but with ``SA_RESTART``, so a thread blocked
on a lock is not woken: dbt's main thread, waiting for its models, learnt of the Ctrl-C only once
every remaining model had run against the stopped engine and failed. :class:`SigintAction` puts
the action the process had before back, so SIGINT is Python's alone again (a KeyboardInterrupt
that dbt handles as with any adapter) and the server stops only when the engine stops it.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from typing import Optional

#: Bytes enough for any platform's ``struct sigaction`` (152 on Linux, 16 on macOS): the action is
#: read and written back whole, never interpreted beyond its first field, the handler.
_ACTION_BYTES = 256
#: How long the first engine of a process waits for the server to replace the action. It does so
#: about 20 ms after it starts, and an engine's start takes about a second, so this is a bound
#: that is never reached, not a delay.
_FIRST_WAIT_SECONDS = 2.0

_libc: Optional[ctypes.CDLL] = ctypes.CDLL(None, use_errno=True) if os.name == "posix" else None
#: Whether an engine of this process looked for the server's replacement: tokio makes it once per
#: process, so only the first engine waits for it.
_looked = False


def _action() -> Optional[ctypes.Array[ctypes.c_char]]:
    if _libc is None:
        return None
    action = ctypes.create_string_buffer(_ACTION_BYTES)
    if _libc.sigaction(signal.SIGINT, None, action) != 0:
        return None
    return action


def _handler(action: ctypes.Array[ctypes.c_char]) -> bytes:
    return action.raw[: ctypes.sizeof(ctypes.c_void_p)]


class SigintAction:
    """The process's SIGINT action when this was created, to put back once Sail's server has
    replaced it."""

    def __init__(self) -> None:
        self._saved = _action()

    def restore(self) -> None:
        """Put the saved action back if it was replaced since. The first server of a process
        replaces it from a thread of its own: that replacement is waited for (it comes long
        before an engine has started); later servers replace nothing."""
        global _looked
        saved = self._saved
        if saved is None or _libc is None:
            return
        deadline = time.monotonic() + (0.0 if _looked else _FIRST_WAIT_SECONDS)
        _looked = True
        while True:
            current = _action()
            if current is None:
                return
            if _handler(current) != _handler(saved):
                _libc.sigaction(signal.SIGINT, saved, None)
                return
            if time.monotonic() >= deadline:
                return
            time.sleep(0.001)
