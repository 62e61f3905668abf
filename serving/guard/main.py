"""The guard process: ``python -m serving.guard``, as fleetd starts it (or by hand).

fleetd binds both sockets itself (the public ``[guard] listen`` and a loopback control
socket), so a taken port refuses fleetd's start with one line, and a guard restart never
loses the port: connections wait in the kernel's backlog while a new guard comes up. The
settings and the control token come in the environment (never on the command line, which
every local user can read). The guard ends when fleetd does (its parent changes), on
SIGTERM after the streams in flight end (at most ``GRACE_S``), and never touches the engine.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import logging
import os
import resource
import secrets
import socket
import sys
import threading
from collections.abc import Sequence
from typing import Any

import uvicorn

from hwcheck.threads import run_in_thread
from serving.guard import errors
from serving.guard.app import GuardApp
from serving.guard.settings import SETTINGS_ENV, TOKEN_ENV, GuardSettings
from serving.http_limits import BoundedHttpTools, bounded

GRACE_S = 5
PARENT_CHECK_S = 1.0
BACKLOG = 2048
# The listener's bounds (issue 36) are fleetd's API's mechanism with the guard's figures
# (``[guard] header_timeout_s``, ``idle_timeout_s``, ``max_connections``): agents send the
# next turn within a minute, and their streams are long (far more than the API's 256).
FILES_PER_CONNECTION = 3  # a client's and an engine's socket each, and room


class GuardProtocol(BoundedHttpTools):
    """httptools with the limits; its 431 and its 503 past the cap in OpenAI's error shape.

    uvicorn's own answer past ``limit_concurrency`` is a plain-text 503 without
    ``Retry-After``; the OpenAI clients retry a 503 that says when. So the cap is applied
    here: past ``max_open`` connections (or tasks) a request gets the guard's 503.
    """

    max_open = 2048
    retry_after_s = 10

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """uvicorn's cap off: this class answers past it."""
        super().connection_made(transport)
        self.limit_concurrency = None
        self._served_app = self.app

    def on_headers_complete(self) -> None:
        """The guard's app, or its 503 when more than ``max_open`` are open."""
        busy = len(self.connections) > self.max_open or len(self.tasks) >= self.max_open
        self.app = functools.partial(_busy, self.retry_after_s) if busy else self._served_app
        super().on_headers_complete()

    def head_refusal(self) -> tuple[bytes, bytes]:
        """The 431 every OpenAI client shows."""
        return b"application/json", errors.head_too_large(self.max_head_bytes // 1024).body()


async def _busy(retry_after_s: int, scope: Any, receive: Any, send: Any) -> None:
    """The 503 past the connection cap: OpenAI's shape, ``Retry-After``, connection closed."""
    error = errors.too_many_connections(retry_after_s)
    body = error.body()
    headers = [
        *error.headers(),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def guard_protocol(settings: GuardSettings) -> type[GuardProtocol]:
    """The guard's uvicorn protocol class with its head timeout, cap and ``Retry-After``."""
    return bounded(
        GuardProtocol,
        settings.header_timeout_s,
        max_open=settings.max_connections,
        retry_after_s=settings.retry_after_s,
    )


def _raise_file_limit(max_connections: int) -> None:
    """Soft ``RLIMIT_NOFILE`` up to what the cap needs (within the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = FILES_PER_CONNECTION * max_connections + 64
    wanted = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        except (OSError, ValueError) as exc:
            log.warning("guard: open files stay at %d (%s)", soft, exc)


log = logging.getLogger("fleetd.guard")


def _bound(address: str) -> socket.socket:
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, int(port)))
    sock.listen(BACKLOG)
    return sock


def _socket(fd: int | None, address: str | None) -> socket.socket:
    if fd is not None:
        return socket.socket(fileno=fd)
    return _bound(address or "127.0.0.1:0")


def _watch_parent(server: uvicorn.Server, parent: int) -> None:
    """End the guard when fleetd is gone (a kill -9 of fleetd leaves no orphan listening)."""
    stop = threading.Event()
    while not stop.wait(PARENT_CHECK_S):
        if os.getppid() != parent:
            log.warning("guard: fleetd (pid %d) is gone: stopping", parent)
            server.should_exit = True
            return


def _loop() -> str:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until SIGTERM/SIGINT or until the parent (fleetd) ends."""
    parser = argparse.ArgumentParser(prog="python -m serving.guard", description=__doc__)
    parser.add_argument("--listen-fd", type=int, help="the public socket, bound by fleetd")
    parser.add_argument("--listen", help="HOST:PORT to bind when run by hand")
    parser.add_argument("--control-fd", type=int, help="the loopback control socket")
    parser.add_argument("--control", help="HOST:PORT of the control socket when run by hand")
    parser.add_argument("--engine-url", help="the engine's base URL until fleetd says otherwise")
    parser.add_argument(
        "--draining", help="the rig drains (why): 503 to every request until fleetd says not"
    )
    parser.add_argument("--watch-parent", action="store_true", help="end when the parent ends")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s", stream=sys.stderr)
    try:
        settings = GuardSettings.model_validate(json.loads(os.environ.get(SETTINGS_ENV) or "{}"))
    except ValueError as exc:
        print(f"guard: bad settings in {SETTINGS_ENV}: {exc}".splitlines()[0], file=sys.stderr)
        return 2
    token = os.environ.pop(TOKEN_ENV, "") or secrets.token_urlsafe(32)
    public = _socket(args.listen_fd, args.listen or settings.listen)
    control = _socket(args.control_fd, args.control)
    control_address = control.getsockname()[:2]
    app = GuardApp(settings, control_address, token, args.engine_url)
    app.hint.draining = args.draining or None  # a guard started while the rig drains
    _raise_file_limit(settings.max_connections)
    config = uvicorn.Config(
        app,
        loop=_loop(),
        http=guard_protocol(settings),
        lifespan="on",
        access_log=False,
        log_level="warning",
        server_header=False,
        timeout_graceful_shutdown=GRACE_S,
        timeout_keep_alive=settings.idle_timeout_s,
    )
    server = uvicorn.Server(config)
    if args.watch_parent:
        parent_pid = os.getppid()
        run_in_thread("parent", lambda: _watch_parent(server, parent_pid), log=log)
    host, port = public.getsockname()[:2]
    log.info(
        "guard %d listening on %s:%s (control %s:%s)", os.getpid(), host, port, *control_address
    )
    server.run(sockets=[public, control])
    return 0
