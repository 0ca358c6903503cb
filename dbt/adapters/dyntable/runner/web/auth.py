"""Who may use the page: anyone on this machine when it listens on the loopback interface only;
with a token (``--ui-token`` or DYNTABLE_UI_TOKEN) when it listens elsewhere, which it refuses
to do without one.

A token is accepted as ``Authorization: Bearer <token>`` (Prometheus' scrape config, curl), or as
the cookie the page sets when opened once as ``/?token=<token>``. /healthz and /readyz answer
without it (an orchestrator's probes; they tell nothing of the data). Actions (POST) also need the
``X-Dyntable-Request`` header, which a page of another site cannot send without the CORS consent
this app never gives, and on the loopback interface the Host header must name this machine, so
that a site rebinding its DNS name to 127.0.0.1 cannot reach the page either.
"""

from __future__ import annotations

import hmac
import ipaddress
from typing import Awaitable, Callable, Optional
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

TOKEN_ENV = "DYNTABLE_UI_TOKEN"
COOKIE = "dyntable_token"
ACTION_HEADER = "x-dyntable-request"
OPEN_PATHS = ("/healthz", "/readyz")
LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1", "[::1]"}


class BindRefused(ValueError):
    """The page may not listen where it was asked to; the message names the option to fix."""


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def check_bind(host: str, token: Optional[str]) -> None:
    if is_loopback(host) or token:
        return
    raise BindRefused(
        f"--ui-host {host} would let other machines reach the page and its actions: pass a token "
        f"with --ui-token (or the {TOKEN_ENV} variable), which every request must then carry, or "
        "keep the default --ui-host 127.0.0.1."
    )


class Guard:
    """ASGI middleware: the token, the action header and (on loopback) the Host check."""

    def __init__(self, app: ASGIApp, token: Optional[str], loopback: bool) -> None:
        self.app = app
        self.token = token
        self.loopback = loopback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refusal = self._refusal(request)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _refusal(self, request: Request) -> Optional[Callable[[Scope, Receive, Send], Awaitable[None]]]:
        host = (request.url.hostname or "").lower()
        if self.loopback and host not in LOOPBACK_NAMES:
            return PlainTextResponse(f"Host {host!r} is not this machine's loopback name.", status_code=421)
        if request.method == "POST" and request.headers.get(ACTION_HEADER) != "1":
            return PlainTextResponse(f"An action needs the {ACTION_HEADER} header.", status_code=403)
        if self.token is None or request.url.path in OPEN_PATHS:
            return None
        offered = parse_qs(request.url.query).get("token", [None])[0]
        if request.url.path == "/" and offered is not None and self._matches(offered):
            return self._login()
        bearer = request.headers.get("authorization", "")
        candidate = bearer[7:] if bearer.lower().startswith("bearer ") else request.cookies.get(COOKIE, "")
        if self._matches(candidate):
            return None
        return PlainTextResponse(
            "This page needs its token: open /?token=<token> once, or send Authorization: Bearer <token>.",
            status_code=401,
        )

    def _matches(self, candidate: str) -> bool:
        assert self.token is not None
        return hmac.compare_digest(candidate.encode(), self.token.encode())

    def _login(self) -> Response:
        """Keep the token in a cookie and drop it from the address bar."""
        response = RedirectResponse("/", status_code=303)
        assert self.token is not None
        response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict")
        return response
