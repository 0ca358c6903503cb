"""Failpoints: named places in a refresh where a test can kill the process.

Exactly-once apply is only believable if a crash at each step is shown to recover
(docs/ARCHITECTURE.md, "Exactly once"), so the refresh calls :func:`failpoint` between its steps. It
does nothing unless the environment variable ``DYNTABLE_FAILPOINT`` names that place; then the
process SIGKILLs itself there, as a power cut or OOM kill would — no cleanup handler runs.

``DYNTABLE_FAILPOINT=during_apply:0.05`` kills 0.05 s after the apply statement started, so the
commit may or may not land: recovery must be right either way.
"""

from __future__ import annotations

import os
import signal
import threading

ENV = "DYNTABLE_FAILPOINT"


def _kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def failpoint(name: str) -> None:
    armed = os.environ.get(ENV, "")
    place, _, delay = armed.partition(":")
    if place != name:
        return
    if delay:
        timer = threading.Timer(float(delay), _kill)
        timer.daemon = True
        timer.start()
    else:
        _kill()
