"""The page's routes: the page and its assets, a JSON API it polls, the actions, /metrics,
/healthz and /readyz. The page's own HTML, JS and CSS are in ``assets/``; plotly.js is served
from the plotly package."""

from __future__ import annotations

from datetime import datetime, timezone
from importlib import resources
from typing import Any, Callable, Dict, List, Optional

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from dbt.adapters.dyntable.dynamic_table.metadata import HistoryRow, MetadataDamaged
from dbt.adapters.dyntable.runner.charts import duration_figure, graph_figure, lag_figure, lag_series
from dbt.adapters.dyntable.runner.control import ActionRefused, Control
from dbt.adapters.dyntable.runner.live import DtView
from dbt.adapters.dyntable.runner.report import PLOTLY_CONFIG, plotly_js
from dbt.adapters.dyntable.runner.web.auth import Guard
from dbt.adapters.dyntable.vocabulary import first_line

#: How many of a DT's latest refreshes the page lists.
LAST_REFRESHES = 20
ASSETS = {
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "index.html": "text/html; charset=utf-8",
}


def _asset(name: str) -> bytes:
    return (resources.files(__package__) / "assets" / name).read_bytes()


def _time(moment: Optional[datetime]) -> Optional[str]:
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _history_row(row: HistoryRow) -> Dict[str, Any]:
    return {
        "started": _time(row.refresh_start_time),
        "trigger": str(row.refresh_trigger),
        "action": str(row.refresh_action) if row.refresh_action else None,
        "state": str(row.state),
        "reason": "; ".join(t for t in (row.reason, row.state_message) if t),
        "rows_inserted": row.rows_inserted or 0,
        "rows_deleted": row.rows_deleted or 0,
        "seconds": round((row.refresh_end_time - row.refresh_start_time).total_seconds(), 3),
        "data_timestamp": _time(row.data_timestamp),
    }


def _dt(view: DtView) -> Dict[str, Any]:
    return {
        "name": view.name,
        "model": view.model,
        "status": str(view.status),
        "scheduling_state": str(view.scheduling_state),
        "consecutive_failures": view.consecutive_failures,
        "target_lag": view.target_lag,
        "target_lag_seconds": view.target_lag_seconds,
        "lag_seconds": None if view.lag_seconds is None else round(view.lag_seconds, 1),
        "data_timestamp": _time(view.data_timestamp),
        "period_seconds": view.period_seconds,
        "refreshing": view.refreshing,
        "last": _history_row(view.last) if view.last is not None else None,
    }


class Page:
    """The endpoints, over one project's :class:`Control` and metrics registry."""

    def __init__(self, control: Control, registry: CollectorRegistry, title: str) -> None:
        self.control = control
        self.registry = registry
        self.title = title
        self._plotly: Optional[bytes] = None

    def index(self, request: Request) -> Response:
        return Response(_asset("index.html"), media_type=ASSETS["index.html"])

    def asset(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name == "plotly.min.js":
            self._plotly = self._plotly or plotly_js()
            body, media = self._plotly, ASSETS["app.js"]
        elif name in ASSETS and name != "index.html":
            body, media = _asset(name), ASSETS[name]
        else:
            return PlainTextResponse("Not found.", status_code=404)
        return Response(body, media_type=media, headers={"Cache-Control": "max-age=3600"})

    def state(self, request: Request) -> Response:
        snapshot = self.control.view.snapshot()
        return JSONResponse(
            {
                "title": self.title,
                "taken_at": _time(datetime.fromtimestamp(snapshot.taken_at, tz=timezone.utc)),
                "runner": self.control.scheduler is not None and self.control.runs_engine,
                "stopping": self.control.stopping.is_set(),
                "dts": [_dt(view) for view in snapshot.dts.values()],
                "graph": graph_figure(snapshot),
                "config": PLOTLY_CONFIG,
            }
        )

    def detail(self, request: Request) -> Response:
        node = self.control.node(request.path_params["name"])
        snapshot = self.control.view.snapshot()
        view = snapshot.dts[node.name]
        rows = snapshot.history.get(node.name, [])
        series = lag_series(node.name, rows, view.target_lag_seconds, snapshot.taken_at)
        return JSONResponse(
            {
                "dt": _dt(view),
                "lag": lag_figure(series),
                "durations": duration_figure(series),
                "history": [_history_row(row) for row in reversed(rows[-LAST_REFRESHES:])],
            }
        )

    def explain(self, request: Request) -> Response:
        return JSONResponse({"text": self.control.explain(request.path_params["name"])})

    def action(self, request: Request) -> Response:
        name, verb = request.path_params["name"], request.path_params["action"]
        actions: Dict[str, Callable[[str], str]] = {
            "refresh": self.control.refresh,
            "suspend": self.control.suspend,
            "resume": self.control.resume,
        }
        if verb not in actions:
            return JSONResponse(
                {"error": f"No action {verb!r}: refresh, suspend or resume."}, status_code=404
            )
        return JSONResponse({"message": actions[verb](name)}, status_code=202 if verb == "refresh" else 200)

    def metrics(self, request: Request) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)

    def healthz(self, request: Request) -> Response:
        return PlainTextResponse("ok")

    def readyz(self, request: Request) -> Response:
        ok, why = self.control.ready()
        return PlainTextResponse(why, status_code=200 if ok else 503)


def _refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ActionRefused)
    return JSONResponse({"error": str(exc)}, status_code=exc.status)


def _damaged(request: Request, exc: Exception) -> Response:
    text = str(exc)
    if request.url.path in ("/readyz", "/metrics"):
        return PlainTextResponse(text, status_code=503)
    return JSONResponse({"error": text}, status_code=503)


def _failed(request: Request, exc: Exception) -> Response:
    return JSONResponse({"error": first_line(exc)}, status_code=500)


def create_app(
    control: Control, registry: CollectorRegistry, title: str, token: Optional[str], loopback: bool
) -> Guard:
    page = Page(control, registry, title)
    routes: List[Route] = [
        Route("/", page.index),
        Route("/static/{name}", page.asset),
        Route("/api/state", page.state),
        Route("/api/dt/{name}", page.detail),
        Route("/api/dt/{name}/explain", page.explain),
        Route("/api/dt/{name}/{action}", page.action, methods=["POST"]),
        Route("/metrics", page.metrics),
        Route("/healthz", page.healthz),
        Route("/readyz", page.readyz),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={ActionRefused: _refused, MetadataDamaged: _damaged, Exception: _failed},
    )
    return Guard(app, token, loopback)
