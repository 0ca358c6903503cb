"""The embedded engine's server where no other process can reach it (docs/ARCHITECTURE.md,
"Engines", "Who may use the embedded engine").

Sail's Spark Connect server has no authentication, and listens on TCP: in the process that started
it, any local process could connect to its port, read any table by path (and any file the user
can read), and write into DTs and metadata tables. So, unless the profile names a ``port`` (to be
reached by other tools on purpose), the server runs in a process of its own, started from this
file, which first moves into a user and network namespace of its own (unprivileged on Linux): its
TCP port exists only inside that namespace, where nothing else runs. The one way in is a Unix
socket in a folder only this user can open, which the child serves, accepting a connection only
from the process that started it (the kernel says who connected, ``SO_PEERCRED``): another
process of the same user is refused as well as other users' ones. Each accepted connection is
forwarded to the server with asyncio, which adds about 0.03 ms to an engine request (a thread per
direction added 0.25).

A warehouse in an object store must be reached over the network, which the namespace has none of.
For it the child first forks an egress process that keeps this machine's network, and points the
server's HTTP client (``HTTP_PROXY``/``HTTPS_PROXY``, which object_store's client honours) at a
proxy on the namespace's loopback; each connection to that proxy is relayed to the egress process
through a second socket in the same folder, accepted from the child alone, and the egress process
opens it: a ``CONNECT`` tunnel for HTTPS, the request as it came for plain HTTP (an endpoint on
this machine, or the cloud's metadata service). A proxy named in the environment is used as before,
from the egress process. The way out carries the server's requests; it lets nobody in.

Where the system allows no unprivileged user namespace, :func:`start` says so and the engine runs
its server in its own process as before, with a warning.

This file runs as the child's ``__main__``: it imports only the standard library before it has
moved into its namespaces (which a process may do only while it has one thread), then pysail.
"""

from __future__ import annotations

import asyncio
import ctypes
import fcntl
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import urllib.request
from typing import Any, Awaitable, Callable, Dict, Optional, Set, Tuple
from urllib.parse import urlsplit

#: ``unshare`` flags (linux/sched.h).
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
#: Bringing up the namespace's loopback (linux/sockios.h, linux/if.h).
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
#: ``prctl`` option: a signal for this process when its parent dies (linux/prctl.h).
PR_SET_PDEATHSIG = 1
#: What the child prints once it serves: ``ready <port>``; or why it could not isolate itself.
READY, UNISOLATED = "ready", "unisolated"
#: How long a start may take before the engine says it did not start.
START_SECONDS = 120.0
SOCKET_NAME = "engine.sock"
#: The egress process's socket, beside the engine's.
EGRESS_SOCKET_NAME = "egress.sock"
#: The variables an HTTP client reads its proxy from (object_store's reads both spellings).
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
#: What the egress process answers when it could not open the connection asked for.
BAD_GATEWAY = b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
TUNNEL_OPEN = b"HTTP/1.1 200 Connection established\r\n\r\n"


class Unisolated(RuntimeError):
    """This system cannot give the server a network of its own (no unprivileged user
    namespaces): the message says why."""


class IsolatedServer:
    """A Sail server in a child process reachable through :attr:`socket_path` alone, by this
    process alone."""

    def __init__(self, child: "subprocess.Popen[str]", folder: str, port: int) -> None:
        self._child = child
        self.folder = folder
        self.port = port

    @property
    def socket_path(self) -> str:
        return os.path.join(self.folder, SOCKET_NAME)

    def channel_builder(self, session_id: str) -> Any:
        """A Spark Connect channel builder dialling the server's socket."""
        from pyspark.sql.connect.client import DefaultChannelBuilder

        path = self.socket_path

        class UnixChannelBuilder(DefaultChannelBuilder):
            def toChannel(self) -> Any:  # noqa: N802 - pyspark's name
                # gRPC's authority for a socket path is no host name, which Sail's server refuses.
                self.setChannelOption("grpc.default_authority", "localhost")
                return self._insecure_channel(f"unix:{path}")

        return UnixChannelBuilder(f"sc://localhost/;session_id={session_id}")

    def stop(self) -> None:
        """End the child (it ends by itself too when this process does: its stdin closes)."""
        child = self._child
        if child.poll() is None:
            if child.stdin is not None:
                child.stdin.close()
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        if child.stdout is not None:
            child.stdout.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def start(port: int = 0, *, way_out: bool = False) -> IsolatedServer:
    """Start the server in a child isolated as the module says, with a way out to the network
    for its requests where ``way_out`` (a warehouse in an object store); :class:`Unisolated`
    where this system cannot, RuntimeError where the server did not start."""
    folder = tempfile.mkdtemp(prefix="dyntable-engine-")  # mode 0700: this user's alone
    command = [sys.executable, "-I", os.path.abspath(__file__), folder, str(os.getpid()), str(port)]
    command += ["way-out"] if way_out else []
    child = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        # Ctrl-C at a terminal is for this process to handle (its engine stops the server).
        start_new_session=True,
    )
    assert child.stdout is not None
    ready, _, _ = select.select([child.stdout], [], [], START_SECONDS)
    line = child.stdout.readline().strip() if ready else ""
    word, _, rest = line.partition(" ")
    if word == READY:
        return IsolatedServer(child, folder, int(rest))
    IsolatedServer(child, folder, 0).stop()
    if word == UNISOLATED:
        raise Unisolated(rest)
    raise RuntimeError(f"its server process ended before it served ({line or 'no word from it'})")


# -- relaying, in the child and its egress process ------------------------------------------------


def _isolate() -> None:
    """Move this (single-threaded) process into a user namespace mapping only its own user and
    group, and a network namespace of its own, and bring up that network's loopback."""
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    with open("/proc/self/setgroups", "w") as setgroups:
        setgroups.write("deny")
    with open("/proc/self/uid_map", "w") as uid_map:
        uid_map.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as gid_map:
        gid_map.write(f"{gid} {gid} 1")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as control:
        request = struct.pack("16sH", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(control, SIOCGIFFLAGS, request)[:18])[1]
        fcntl.ioctl(control, SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | IFF_UP))


def _peer_pid(connection: socket.socket) -> int:
    pid, _, _ = struct.unpack("3i", connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    return int(pid)


class _Forward(asyncio.Protocol):
    """One direction of a forwarded connection: what arrives is written to ``peer``."""

    def __init__(self, peer: Optional[asyncio.Transport] = None) -> None:
        self.peer = peer
        self.transport: Optional[asyncio.Transport] = None
        self.waiting: list[bytes] = []

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.peer is None:
            self.waiting.append(data)
        else:
            self.peer.write(data)

    def connection_lost(self, exc: Optional[Exception]) -> None:
        if self.peer is not None:
            self.peer.close()


Opener = Callable[[Callable[[], _Forward]], Awaitable[Tuple[Any, Any]]]


class _Relay(_Forward):
    """A connection refused unless from ``owner`` (any, where None), else forwarded to the
    upstream ``open_upstream`` opens; what arrives meanwhile waits."""

    def __init__(self, owner: Optional[int], open_upstream: Opener) -> None:
        super().__init__()
        self.owner, self.open_upstream = owner, open_upstream

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        if self.owner is not None and _peer_pid(transport.get_extra_info("socket")) != self.owner:
            transport.abort()
            return
        asyncio.get_running_loop().create_task(self._connect(transport))

    async def _connect(self, transport: asyncio.Transport) -> None:
        try:
            upstream, _ = await self.open_upstream(lambda: _Forward(transport))
        except OSError:  # the egress process is gone: so is this connection
            transport.close()
            return
        if transport.is_closing():  # the client went while its connection was being made
            upstream.close()
            return
        connection = upstream.get_extra_info("socket")
        if connection.family == socket.AF_INET:
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for data in self.waiting:
            upstream.write(data)
        self.waiting, self.peer = [], upstream


# -- the egress process: the server's way out, outside its namespace ------------------------------


def _fork_egress(folder: str) -> None:
    """Fork the process that opens the server's connections to the network (it keeps this
    machine's). Its socket listens before the fork, so the server never dials it too early."""
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path = os.path.join(folder, EGRESS_SOCKET_NAME)
    listening.bind(path)
    os.chmod(path, 0o600)
    listening.listen(64)
    child = os.getpid()
    if os.fork() != 0:
        listening.close()
        return
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != child:  # the child died before the line above
        os._exit(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for stream in (0, 1):  # the owner's pipes are the child's to answer on
        os.dup2(devnull, stream)
    asyncio.run(_egress(listening, child))
    os._exit(0)


async def _egress(listening: socket.socket, owner: int) -> None:
    """Serve ``listening`` to ``owner`` alone, opening connections directly or through the
    proxies the environment names (as it was before the child named its own), until this
    process is killed with its parent."""
    proxies = urllib.request.getproxies()
    # The loop holds tasks weakly, and a connection its client half-closed is no longer watched
    # by it: without a reference here, a collection ends its task before the answer is carried.
    carrying: Set["asyncio.Task[None]"] = set()

    def carry(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.get_running_loop().create_task(_carry(reader, writer, owner, proxies))
        carrying.add(task)
        task.add_done_callback(carrying.discard)

    server = await asyncio.start_unix_server(carry, sock=listening)
    await server.serve_forever()


async def _carry(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, owner: int, proxies: Dict[str, str]
) -> None:
    """One of the server's connections: opened where its first request says (``CONNECT
    host:port`` or ``METHOD http://host:port/...``), or to the environment's proxy for it."""
    if _peer_pid(writer.get_extra_info("socket")) != owner:
        writer.close()
        return
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
        tunnel = method == "CONNECT"
        host, port = _destination(target, tunnel)
        proxy = _proxy_for(host, tunnel, proxies)
        upstream_reader, upstream = await asyncio.open_connection(*(proxy or (host, port)))
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, OSError):
        writer.write(BAD_GATEWAY)
        writer.close()
        return
    if tunnel and proxy is None:
        writer.write(TUNNEL_OPEN)
    else:  # plain HTTP in absolute form, which servers accept; or the request for the proxy
        upstream.write(head)
    try:
        await asyncio.gather(_pipe(reader, upstream), _pipe(upstream_reader, writer))
    except OSError:  # one side reset: the other side ends too
        pass
    finally:
        upstream.close()
        writer.close()


def _destination(target: str, tunnel: bool) -> Tuple[str, int]:
    if tunnel:
        host, _, port = target.rpartition(":")
        return host.strip("[]"), int(port)
    url = urlsplit(target)
    if url.scheme != "http" or not url.hostname:
        raise ValueError(f"not a proxy request: {target}")
    return url.hostname, url.port or 80


def _proxy_for(host: str, tunnel: bool, proxies: Dict[str, str]) -> Optional[Tuple[str, int]]:
    """The environment's proxy for a connection to ``host``, as the user's tools would use it."""
    url = proxies.get("https" if tunnel else "http")
    if not url or urllib.request.proxy_bypass(host):
        return None
    parts = urlsplit(url if "://" in url else f"http://{url}")
    return parts.hostname or "", parts.port or 80


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until ``reader``'s side has said all, then say so on ``writer``'s (a half-close:
    the answer may still come the other way)."""
    while data := await reader.read(1 << 16):
        writer.write(data)
        await writer.drain()
    if writer.can_write_eof():
        writer.write_eof()


# -- the child, in its namespaces -----------------------------------------------------------------


def _proxy_socket() -> socket.socket:
    """The proxy the server's HTTP client is pointed at, on the namespace's loopback."""
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.bind(("127.0.0.1", 0))
    listening.listen(64)
    address = f"http://127.0.0.1:{listening.getsockname()[1]}"
    os.environ.update({name: address for name in PROXY_VARIABLES})
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        os.environ.pop(name, None)
    return listening


def _serve(folder: str, owner: int, port: int, way_out: bool) -> None:
    """The child: isolate, start Sail, serve the socket until the owner's pipe closes."""
    if way_out:
        _fork_egress(folder)
    try:
        _isolate()
    except OSError as exc:
        print(f"{UNISOLATED} {exc}", flush=True)
        return
    proxy = _proxy_socket() if way_out else None
    from pysail.spark import SparkConnectServer

    server = SparkConnectServer("127.0.0.1", port)
    server.start(background=True)
    _, listening = server.listening_address
    # The owner's end of stdin closes when it stops the engine or dies, however it dies.
    threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()

    async def forward() -> None:
        loop = asyncio.get_running_loop()
        path = os.path.join(folder, SOCKET_NAME)

        def to_server(protocol: Callable[[], _Forward]) -> Awaitable[Tuple[Any, Any]]:
            return loop.create_connection(protocol, "127.0.0.1", listening)

        def to_egress(protocol: Callable[[], _Forward]) -> Awaitable[Tuple[Any, Any]]:
            return loop.create_unix_connection(protocol, os.path.join(folder, EGRESS_SOCKET_NAME))

        unix = await loop.create_unix_server(lambda: _Relay(owner, to_server), path)
        os.chmod(path, 0o600)
        if proxy is not None:  # only this namespace's processes (the server) reach it
            await loop.create_server(lambda: _Relay(None, to_egress), sock=proxy)
        print(f"{READY} {listening}", flush=True)
        await unix.serve_forever()

    asyncio.run(forward())


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:] == ["way-out"])
