"""What `dyntable run` and `dyntable ui` tell as they go: tables for people (``--log-format
text``), or one JSON object per line for a log pipeline (``--log-format json``): an event per
refresh (``"event": "refresh"``: model, action, reason, duration, rows, data timestamp), per tick,
and the runner's start, page and stop."""

from __future__ import annotations

import json
import sys
import threading
from datetime import datetime, timezone
from typing import Any, Callable, List, Optional

from rich.console import Console, RenderableType

from dbt.adapters.dyntable.dynamic_table.lifecycle import State, Trigger
from dbt.adapters.dyntable.runner.scheduler import Outcome, TickPlan

LOG_FORMATS = ("text", "json")


def _utc(moment: Optional[datetime]) -> Optional[str]:
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def refresh_event(outcome: Outcome) -> dict[str, Any]:
    return {
        "event": "refresh",
        "model": outcome.model,
        "name": outcome.name,
        "state": str(outcome.state),
        "action": str(outcome.action) if outcome.action else None,
        "trigger": str(outcome.trigger),
        "reason": outcome.reason or outcome.message,
        "message": outcome.message,
        "duration_seconds": round(outcome.seconds, 4),
        "rows_inserted": outcome.rows_inserted,
        "rows_deleted": outcome.rows_deleted,
        "data_timestamp": _utc(outcome.data_timestamp),
    }


class RunLog:
    """The runner's output, in one format; safe to call from the tick threads."""

    def __init__(
        self,
        console: Console,
        log_format: str,
        outcome_table: Callable[[str, List[Outcome]], RenderableType],
    ) -> None:
        self.console = console
        self.json = log_format == "json"
        self.outcome_table = outcome_table
        # Reentrant: the signal handler says why the runner stops on the main thread, which may
        # be holding it (a `--once` tick logs there); a plain lock would wait for itself forever.
        self._lock = threading.RLock()
        #: The refreshes that failed (FAILED, UPSTREAM_FAILED): `dyntable run` then exits 1.
        self.failures: List[Outcome] = []

    def event(self, event: str, **fields: Any) -> None:
        """One JSON line (json format only)."""
        if not self.json:
            return
        line = json.dumps({"time": _utc(datetime.now(timezone.utc)), "event": event, **fields}, default=str)
        with self._lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def say(self, text: str, **fields: Any) -> None:
        """A sentence for people; in json, a ``message`` event."""
        if self.json:
            self.event(fields.pop("event", "message"), message=text, **fields)
            return
        with self._lock:
            self.console.print(text, highlight=False)

    def show(self, renderable: RenderableType) -> None:
        """A table for people (nothing in json: its facts come as events)."""
        if not self.json:
            with self._lock:
                self.console.print(renderable)

    def tick(self, plan: TickPlan, outcomes: List[Outcome]) -> None:
        with self._lock:
            self.failures.extend(o for o in outcomes if o.state in (State.FAILED, State.UPSTREAM_FAILED))
        at = plan.data_timestamp.strftime("%H:%M:%S")
        manual = plan.trigger is not Trigger.SCHEDULED
        if self.json:
            for outcome in outcomes:
                self.event(**refresh_event(outcome))
            self.event(
                "tick",
                trigger=str(plan.trigger),
                data_timestamp=_utc(plan.data_timestamp),
                refreshes=len(outcomes),
            )
            return
        title = f"{'manual refresh' if manual else 'tick'} {at}"
        with self._lock:
            if outcomes:
                self.console.print(self.outcome_table(title, outcomes))
            else:
                self.console.print(f"{title}: nothing due", style="dim")
