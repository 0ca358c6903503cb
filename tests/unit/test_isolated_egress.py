"""The embedded engine's way out to an object store (engines/isolated.py's egress process): what it
opens for each kind of request, for whom, and through which proxy. Real sockets, real servers."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import http.server
import os
import socket
import socketserver
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest

from dbt.adapters.dyntable.engines.isolated import BAD_GATEWAY, TUNNEL_OPEN, _egress


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(1024):
            self.request.sendall(data)


class _Answer(http.server.BaseHTTPRequestHandler):
    """Answers every GET with the request line it received."""

    seen: List[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        _Answer.seen.append(self.requestline)
        body = self.requestline.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def servers() -> Iterator[Tuple[int, int]]:
    """An echo server and an HTTP server on 127.0.0.1: their ports."""
    echo = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    answer = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    for server in (echo, answer):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield echo.server_address[1], answer.server_address[1]
    for server in (echo, answer):
        server.shutdown()
        server.server_close()


class _Egress:
    """The egress server for this process (as its owner), in a thread of its own."""

    def __init__(self, folder: Path) -> None:
        self.path = str(folder / "egress.sock")
        listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listening.bind(self.path)
        listening.listen(8)
        self._loop = asyncio.new_event_loop()
        self._task = self._loop.create_task(_egress(listening, os.getpid()))
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            self._loop.run_until_complete(self._task)

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join(timeout=10)
        self._loop.close()


@pytest.fixture
def egress(tmp_path: Path) -> Iterator[str]:
    server = _Egress(tmp_path)
    yield server.path
    server.stop()


def _ask(path: str, request: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(10)
        connection.connect(path)
        connection.sendall(request)
        connection.shutdown(socket.SHUT_WR)
        received = b""
        while data := connection.recv(4096):
            received += data
        return received


def test_a_connect_opens_a_tunnel_to_the_host_it_names(egress: str, servers: Tuple[int, int]) -> None:
    echo, _ = servers
    answer = _ask(egress, f"CONNECT 127.0.0.1:{echo} HTTP/1.1\r\nHost: x\r\n\r\nhello through".encode())
    assert answer == TUNNEL_OPEN + b"hello through"


class _LateEcho(socketserver.BaseRequestHandler):
    """Reads all it is sent, then answers with it a moment later."""

    def handle(self) -> None:
        received = b""
        while data := self.request.recv(1024):
            received += data
        time.sleep(0.5)
        self.request.sendall(received)


def test_a_half_closed_connection_is_answered_after_a_collection(egress: str) -> None:
    """While the client has said all and the answer is late, nothing the loop watches holds the
    connection's task: a garbage collection then must not end it (it did, now and then, in CI)."""
    late = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _LateEcho)
    threading.Thread(target=late.serve_forever, daemon=True).start()
    collecting = threading.Timer(0.25, gc.collect)
    collecting.start()
    try:
        port = late.server_address[1]
        answer = _ask(egress, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\nlate".encode())
    finally:
        collecting.join()
        late.shutdown()
        late.server_close()
    assert answer == TUNNEL_OPEN + b"late"


def test_plain_http_goes_as_it_came_to_the_host_it_names(egress: str, servers: Tuple[int, int]) -> None:
    _, http_port = servers
    line = f"GET http://127.0.0.1:{http_port}/bucket/key HTTP/1.1"
    answer = _ask(egress, f"{line}\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.0 200") and answer.endswith(line.encode()), answer


@pytest.mark.parametrize(
    "request_line", ["CONNECT 127.0.0.1:1 HTTP/1.1", "GET /relative HTTP/1.1", "nonsense"]
)
def test_what_cannot_be_opened_is_answered_bad_gateway(egress: str, request_line: str) -> None:
    assert _ask(egress, f"{request_line}\r\n\r\n".encode()) == BAD_GATEWAY


def test_another_process_is_refused(egress: str, servers: Tuple[int, int]) -> None:
    echo, _ = servers
    code = (
        "import socket, sys\n"
        "c = socket.socket(socket.AF_UNIX); c.settimeout(10); c.connect(sys.argv[1])\n"
        "try:\n"
        "    c.sendall(('CONNECT 127.0.0.1:' + sys.argv[2] + ' HTTP/1.1\\r\\n\\r\\nx').encode())\n"
        "    print('ANSWERED' if c.recv(100) else 'refused')\n"
        "except OSError as exc:\n"
        "    print('refused', type(exc).__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, egress, str(echo)], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.startswith("refused"), done.stdout + done.stderr  # closed unanswered


def test_a_proxy_named_in_the_environment_carries_the_request(
    tmp_path: Path, servers: Tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The proxy (here the HTTP server, which records what it is asked) gets the request as the
    server's client sent it, except for hosts the environment says to reach directly."""
    _, http_port = servers
    for name in ("http_proxy", "HTTP_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{http_port}")
    monkeypatch.setenv("no_proxy", "direct.invalid")
    server = _Egress(tmp_path)
    path = server.path
    try:
        _Answer.seen.clear()
        line = "GET http://bucket.example.invalid/key HTTP/1.1"
        answer = _ask(path, f"{line}\r\nConnection: close\r\n\r\n".encode())
        assert answer.endswith(line.encode()) and _Answer.seen == [line], answer
        direct = _ask(path, b"GET http://direct.invalid/key HTTP/1.1\r\n\r\n")
        assert direct == BAD_GATEWAY  # bypassing the proxy, it cannot be resolved
        assert _Answer.seen == [line]
    finally:
        server.stop()
