"""Failpoints: named places in a refresh where a test can kill or interrupt the process.

Exactly-once apply is only believable if a crash at each step is shown to recover
(docs/ARCHITECTURE.md, "Exactly once"), so the refresh calls :func:`failpoint` between its steps. It
does nothing unless the environment variable ``DYNTABLE_FAILPOINT`` names that place; then the
process SIGKILLs itself there, as a power cut or OOM kill would — no cleanup handler runs.

``DYNTABLE_FAILPOINT=during_apply:0.05`` kills 0.05 s after the apply statement started, so the
commit may or may not land: recovery must be right either way. ``during_apply:SIGINT`` sends SIGINT
to the process group instead, as a terminal's Ctrl-C does ("Interrupting a run"); ``during_apply:SIGTERM``
sends SIGTERM to the process, as a container's stop does (the runner's clean shutdown).
"""

from __future__ import annotations

import os
import signal
import threading

ENV = "DYNTABLE_FAILPOINT"


def _kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _interrupt() -> None:
    # A terminal's SIGINT comes from outside the process, and Linux gives it to the main thread.
    # Sent from inside, Linux may give it to the sending thread, where Python only marks it: the
    # main thread, blocked waiting for its models, would learn of it after the next model had
    # started. This thread blocks SIGINT, so the kernel chooses among the others as it does for
    # a terminal's. It stays blocked: only the main thread runs Python's signal handlers.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    os.killpg(os.getpgrp(), signal.SIGINT)


def _terminate() -> None:
    # As for SIGINT: blocked here, so that the kernel gives it to a thread that handles it.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    os.kill(os.getpid(), signal.SIGTERM)


def failpoint(name: str) -> None:
    place, *options = os.environ.get(ENV, "").split(":")
    if place != name:
        return
    act = _interrupt if "SIGINT" in options else _terminate if "SIGTERM" in options else _kill
    delays = [float(o) for o in options if o not in ("SIGINT", "SIGTERM")]
    if delays:
        timer = threading.Timer(delays[0], act)
        timer.daemon = True
        timer.start()
    else:
        act()
