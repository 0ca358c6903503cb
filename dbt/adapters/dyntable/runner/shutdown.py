"""Stopping a runner cleanly on SIGTERM or SIGINT (a container's stop, systemd, Ctrl-C).

The first signal stops the scheduler: no tick and no refresh starts any more, and the refreshes
in flight get the first half of ``stop_timeout`` to finish. Then their statements are cancelled
(``Engine.interrupt``): each such refresh is recorded CANCELLED and either committed or not, never
half (docs/ARCHITECTURE.md, "Interrupting a run"); the next refresh carries on from what its
table committed. A stop still not done at ``stop_timeout`` ends the process at once, as a second
signal does: what was in flight is then recovered by the next refresh, as after a crash
(docs/ARCHITECTURE.md, "Exactly once").
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from types import FrameType
from typing import Any, Callable, Dict, Optional

SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: Exit status when a stop is forced (a second signal, or past the bound): 128 + the signal.
FORCED = 128
#: How often statements are cancelled again until the runner has stopped.
RECANCEL_SECONDS = 0.5


class GracefulStop:
    """Signal handling for one run of the scheduler, in the main thread (a no-op elsewhere).

    ``on_stop`` runs at the first signal (stop the scheduler), ``on_cancel`` half-way through the
    bound (interrupt the engine); ``say`` tells the user what happens."""

    def __init__(
        self,
        stop_timeout: float,
        on_stop: Callable[[], None],
        on_cancel: Callable[[], None],
        say: Callable[[str], None],
        stopping: str = "Refreshes in flight get {half} s to finish, then are cancelled",
    ) -> None:
        """``stopping``: what the first signal does, said with the half of the bound in ``{half}``."""
        self.stopping = stopping
        self.stop_timeout = stop_timeout
        self.on_stop = on_stop
        self.on_cancel = on_cancel
        self.say = say
        self.event = threading.Event()
        self.signal_name: Optional[str] = None
        self._previous: Dict[int, Any] = {}
        self._timers: list[threading.Timer] = []

    def __enter__(self) -> "GracefulStop":
        if threading.current_thread() is threading.main_thread():
            for signum in SIGNALS:
                self._previous[signum] = signal.getsignal(signum)
                signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for timer in self._timers:
            timer.cancel()
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    @property
    def stopped(self) -> bool:
        return self.event.is_set()

    def _handle(self, signum: int, frame: Optional[FrameType]) -> None:
        name = signal.Signals(signum).name
        if self.event.is_set():
            self.say(f"{name} again: stopping at once; a refresh in flight is recovered by the next one.")
            self._exit(FORCED + signum)
        self.signal_name = name
        self.event.set()
        half = self.stop_timeout / 2
        self.say(
            f"{name}: stopping. {self.stopping.format(half=f'{half:g}')} (a second {name} stops at once)."
        )
        self.on_stop()
        self._later(half, self._cancel)
        self._later(self.stop_timeout, lambda: self._give_up(FORCED + signum))

    def _later(self, seconds: float, action: Callable[[], None]) -> None:
        timer = threading.Timer(seconds, action)
        timer.daemon = True
        self._timers.append(timer)
        timer.start()

    def _cancel(self) -> None:
        self.say("Cancelling the refreshes still in flight.")
        self._cancel_again()

    def _cancel_again(self) -> None:
        # Again and again: JVM Spark cancels the jobs running at the call, and a statement still
        # being planned then may start its jobs after it.
        self.on_cancel()
        self._later(RECANCEL_SECONDS, self._cancel_again)

    def _give_up(self, status: int) -> None:
        self.say(f"Not stopped within {self.stop_timeout:g} s: stopping at once.")
        self._exit(status)

    @staticmethod
    def _exit(status: int) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
