"""The runner's log under a signal: SIGTERM's handler says why the runner stops, on the main thread."""

from __future__ import annotations

import io
import json
import os
import signal
import sys
import threading

from rich.console import Console

from dbt.adapters.dyntable.runner.log import RunLog


class SignalledOnWrite(io.StringIO):
    """Standard output that receives SIGTERM while it writes its first line, as a runner
    logging a tick on the main thread may (`dyntable run --once`)."""

    def __init__(self) -> None:
        super().__init__()
        self.signalled = False

    def write(self, text: str) -> int:
        if not self.signalled:
            self.signalled = True
            os.kill(os.getpid(), signal.SIGTERM)
            signal.sigtimedwait([], 0)  # a system call, after which Python runs the handler
        return super().write(text)


def hung(signum: int, frame: object) -> None:
    raise AssertionError("the signal handler waited 10 s for the log's lock, which its thread held")


def test_the_stop_message_is_said_while_a_line_is_being_written(monkeypatch) -> None:
    log = RunLog(Console(file=io.StringIO()), "json", lambda title, outcomes: title)
    out = SignalledOnWrite()
    monkeypatch.setattr(sys, "stdout", out)
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: log.say("SIGTERM: stopping."))
    # A lock the handler cannot take would hang this thread for good: a watchdog's signal wakes
    # it with the failure.
    watchdog = signal.signal(signal.SIGUSR1, hung)
    main = threading.get_ident()
    timer = threading.Timer(10, lambda: signal.pthread_kill(main, signal.SIGUSR1))
    timer.start()
    try:
        log.event("tick", refreshes=0)
    finally:
        timer.cancel()
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGUSR1, watchdog)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["event"] for line in lines] == ["message", "tick"]
    assert lines[0]["message"] == "SIGTERM: stopping."
