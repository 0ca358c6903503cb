"""Serving the page: uvicorn on a thread of the runner's process, on a socket bound before the
engine starts, so a port in use or a refused host fails at once with one message."""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable, FrozenSet, Optional

import uvicorn

from dbt.adapters.dyntable.dynamic_table.metadata import MetadataStore
from dbt.adapters.dyntable.dynamic_table.refresh.record import Recorder
from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService
from dbt.adapters.dyntable.runner.control import Control, OnTick
from dbt.adapters.dyntable.runner.graph import DynamicTableGraph
from dbt.adapters.dyntable.runner.live import LiveView
from dbt.adapters.dyntable.runner.scheduler import Scheduler
from dbt.adapters.dyntable.runner.web.app import create_app
from dbt.adapters.dyntable.runner.web.auth import check_bind, is_loopback
from dbt.adapters.dyntable.runner.web.metrics import registry_for

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
STOP_SECONDS = 3.0


class PageError(RuntimeError):
    """The page cannot listen where it was asked to; the message says what to change."""


@dataclass(frozen=True)
class PageOptions:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: Optional[str] = None


def bind(options: PageOptions) -> socket.socket:
    """The page's listening socket; refuses a host other machines reach without a token."""
    check_bind(options.host, options.token)
    family = socket.AF_INET6 if ":" in options.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((options.host.strip("[]"), options.port))
    except OSError as exc:
        sock.close()
        raise PageError(
            f"The page cannot listen on {options.host}:{options.port} ({exc.strerror}): choose another "
            "--ui-port (0 picks a free one) or --ui-host."
        ) from None
    sock.listen(128)
    sock.setblocking(False)
    return sock


class PageServer:
    """The page of one project, serving on a daemon thread until :meth:`stop`."""

    def __init__(
        self,
        options: PageOptions,
        graph: DynamicTableGraph,
        metadata: MetadataStore,
        recorder: Recorder,
        start_service: Callable[[], DynamicTableService],
        title: str,
        on_tick: Optional[OnTick] = None,
        runner: bool = False,
    ) -> None:
        self.socket = bind(options)
        self.view = LiveView(graph, metadata, refreshing=self._refreshing)
        self.control = Control(graph, self.view, recorder, start_service, on_tick, runs_engine=runner)
        registry, self.runner_counters = registry_for(self.view, datetime.now(timezone.utc), runner)
        app = create_app(self.control, registry, title, options.token, is_loopback(options.host))
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self.socket]}, name="dyntable-page", daemon=True
        )
        host, port = self.socket.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{port}/"

    def _refreshing(self) -> FrozenSet[str]:
        scheduler = self.control.scheduler
        return frozenset(scheduler.refreshing) if scheduler is not None else frozenset()

    def start(self) -> "PageServer":
        self._thread.start()
        return self

    def attach(self, service: DynamicTableService, scheduler: Scheduler) -> None:
        self.control.attach(service, scheduler)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(STOP_SECONDS)
        self.socket.close()
