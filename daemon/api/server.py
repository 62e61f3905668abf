"""The API's HTTP server: bound synchronously, served on its own thread, probed for READY.

Binding happens in ``bind`` (the caller's thread, before anything else of fleetd opens),
so "address already in use" stops fleetd with a clear line instead of a dead server
thread behind a ``READY=1``, and with nothing half-started behind it.
"""

from __future__ import annotations

import errno
import socket
import threading
import time

import httpx
import uvicorn
from fastapi import FastAPI

from daemon.api.http_limits import HEAD_TIMEOUT_S, uvicorn_limits
from hwcheck.threads import CrashReport, ServiceThread, run_in_thread
from web.rendered import invalidate_rendered
from web.streams import close_streams

READY_TIMEOUT_S = 60.0
JOIN_TIMEOUT_S = 10.0


def split_listen(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` (IPv6 in brackets allowed) -> (host, port)."""
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


def url_host(host: str) -> str:
    """The host part of a URL that reaches a server listening on ``host``."""
    if host in {"0.0.0.0", ""}:  # noqa: S104 - only turning a wildcard into a probe address
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


# What a person does about the two usual bind failures.
LISTEN_HINTS = {
    errno.EADDRINUSE: " (another fleetd or program holds it: stop it, or pick another "
    "address with --listen or [web] listen)",
    errno.EADDRNOTAVAIL: " (no interface of this machine has that address: see --listen)",
}


class ApiServer:
    """uvicorn serving one app on ``listen`` (``HOST:PORT``) from a daemon thread."""

    def __init__(self, listen: str, head_timeout_s: float = HEAD_TIMEOUT_S) -> None:
        self.listen = listen
        self._head_timeout_s = head_timeout_s
        self.host, self.port = split_listen(listen)
        self._server: uvicorn.Server | None = None
        self._thread: ServiceThread | None = None
        self._app: FastAPI | None = None
        self._socket: socket.socket | None = None

    def bind(self) -> socket.socket:
        """Bind the address now; ``RuntimeError`` with one line when it cannot be had.

        Not yet listening: a client connecting before ``start`` is refused at once rather
        than left waiting in the backlog.
        """
        if self._socket is not None:
            return self._socket
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted sockets only when
        # their proto says TCP. Without it a keep-alive client waits out Nagle against the
        # delayed ACK, about 40 ms a request.
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError as exc:
            sock.close()
            hint = LISTEN_HINTS.get(exc.errno or 0, "")
            raise RuntimeError(f"cannot listen on {self.listen}: {exc.strerror}{hint}") from None
        sock.set_inheritable(False)
        self._socket = sock
        return sock

    def close(self) -> None:
        """Give the address back (fleetd did not start after all)."""
        if self._socket is not None and self._thread is None:
            self._socket.close()
            self._socket = None

    def start(self, app: FastAPI, on_crash: CrashReport | None = None) -> None:
        """Listen on the bound address (binding now if not yet), then serve on a thread.

        ``on_crash``: told if the server's thread dies with an error (``alive`` says so too).
        """
        self._app = app
        sock = self.bind()
        try:
            sock.listen(128)
        except OSError as exc:  # another socket bound with SO_REUSEADDR listened first
            self.close()
            hint = LISTEN_HINTS.get(exc.errno or 0, "")
            raise RuntimeError(f"cannot listen on {self.listen}: {exc.strerror}{hint}") from None
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            **uvicorn_limits(self._head_timeout_s),
        )
        server = self._server = uvicorn.Server(config)
        self._thread = run_in_thread("api", lambda: server.run(sockets=[sock]), on_crash=on_crash)

    def state_changed(self) -> None:
        """The daemon's picture changed (a poll ended): the status and /metrics are re-rendered."""
        if self._app is not None:
            invalidate_rendered(self._app)

    def alive(self) -> bool:
        """True while the server thread runs."""
        return self._thread is not None and self._thread.alive()

    def wait_ready(self, stop: threading.Event, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Return once ``/healthz`` answers 200; ``RuntimeError`` when it never does."""
        deadline = time.monotonic() + timeout_s
        url = f"http://{url_host(self.host)}:{self.port}/healthz"
        # One client for every try, plain HTTP to itself: no proxy from the environment (an
        # HTTP_PROXY without 127.0.0.1 in NO_PROXY would send the check elsewhere) and no TLS
        # context (loading the CA bundle cost 20 ms of CPU a try).
        with httpx.Client(timeout=1.0, trust_env=False, verify=False) as client:  # noqa: S501
            while time.monotonic() < deadline:
                if self._thread is not None and not self._thread.alive():
                    raise RuntimeError(f"the API could not listen on {self.listen} (port in use?)")
                try:
                    if client.get(url).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                stop.wait(0.05)
        raise RuntimeError(f"the API did not answer on {url} within {timeout_s:.0f} s")

    def stop(self) -> None:
        """End open streams, ask the server to exit and wait for its thread (bounded)."""
        if self._app is not None:
            close_streams(self._app)  # each stream ends at its next tick
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(JOIN_TIMEOUT_S)
