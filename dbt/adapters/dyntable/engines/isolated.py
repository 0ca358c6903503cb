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
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from typing import Any, Optional

#: ``unshare`` flags (linux/sched.h).
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
#: Bringing up the namespace's loopback (linux/sockios.h, linux/if.h).
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
#: What the child prints once it serves: ``ready <port>``; or why it could not isolate itself.
READY, UNISOLATED = "ready", "unisolated"
#: How long a start may take before the engine says it did not start.
START_SECONDS = 120.0
SOCKET_NAME = "engine.sock"


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


def start(port: int = 0) -> IsolatedServer:
    """Start the server in a child isolated as the module says; :class:`Unisolated` where this
    system cannot, RuntimeError where the server did not start."""
    folder = tempfile.mkdtemp(prefix="dyntable-engine-")  # mode 0700: this user's alone
    command = [sys.executable, "-I", os.path.abspath(__file__), folder, str(os.getpid()), str(port)]
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


# -- the child -----------------------------------------------------------------------------------


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


class _Client(_Forward):
    """A connection to the socket: refused unless from ``owner``, else forwarded to the server."""

    def __init__(self, owner: int, port: int) -> None:
        super().__init__()
        self.owner, self.port = owner, port

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        if _peer_pid(transport.get_extra_info("socket")) != self.owner:
            transport.abort()
            return
        asyncio.get_running_loop().create_task(self._connect(transport))

    async def _connect(self, transport: asyncio.Transport) -> None:
        loop = asyncio.get_running_loop()
        upstream, _ = await loop.create_connection(lambda: _Forward(transport), "127.0.0.1", self.port)
        if transport.is_closing():  # the client went while its connection was being made
            upstream.close()
            return
        upstream.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for data in self.waiting:
            upstream.write(data)
        self.waiting, self.peer = [], upstream


def _serve(folder: str, owner: int, port: int) -> None:
    """The child: isolate, start Sail, serve the socket until the owner's pipe closes."""
    try:
        _isolate()
    except OSError as exc:
        print(f"{UNISOLATED} {exc}", flush=True)
        return
    from pysail.spark import SparkConnectServer

    server = SparkConnectServer("127.0.0.1", port)
    server.start(background=True)
    _, listening = server.listening_address
    # The owner's end of stdin closes when it stops the engine or dies, however it dies.
    threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()

    async def forward() -> None:
        loop = asyncio.get_running_loop()
        path = os.path.join(folder, SOCKET_NAME)
        unix = await loop.create_unix_server(lambda: _Client(owner, listening), path)
        os.chmod(path, 0o600)
        print(f"{READY} {listening}", flush=True)
        await unix.serve_forever()

    asyncio.run(forward())


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
