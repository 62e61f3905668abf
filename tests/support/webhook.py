"""A webhook receiver on loopback: records every request; can be stopped and restarted.

Stopping closes the listening socket (the sender sees "connection refused", as with a
receiver that is down); ``start()`` listens again on the same port. ``status`` is what
it answers (a 503 receiver is up but refusing). Requests are kept in arrival order.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.fleetd import free_port


@dataclass(frozen=True)
class Received:
    """One request as it arrived."""

    path: str
    headers: dict[str, str]
    body: bytes
    at_s: float  # time.monotonic() when it arrived

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


class WebhookReceiver:
    """An HTTP server on 127.0.0.1 recording POSTs."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.requests: list[Received] = []
        self.status = 200
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> WebhookReceiver:
        """Listen (again) on the port."""
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                status = receiver.status
                if status < 300:
                    receiver.record(
                        Received(self.path, dict(self.headers.items()), body, time.monotonic())
                    )
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def wrap(self, context: ssl.SSLContext) -> None:
        """Serve HTTPS with ``context`` (call right after ``start``)."""
        assert self._server is not None
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)

    def stop(self) -> None:
        """Stop listening (connections are refused until ``start``)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def record(self, received: Received) -> None:
        """Keep one request and wake whoever waits."""
        with self._arrived:
            self.requests.append(received)
            self._arrived.notify_all()

    def wait_for(self, predicate: Any, timeout_s: float, what: str) -> list[Received]:
        """Wait until ``predicate(requests)`` holds; the requests then. Fails naming ``what``."""
        deadline = time.monotonic() + timeout_s
        with self._arrived:
            while not predicate(self.requests):
                left = deadline - time.monotonic()
                if left <= 0:
                    bodies = [r.body[:200] for r in self.requests[-3:]]
                    raise AssertionError(f"timed out waiting for {what}; last: {bodies}")
                self._arrived.wait(left)
            return list(self.requests)

    def bodies(self, path: str | None = None) -> list[Any]:
        """Every JSON body so far (at ``path`` only, when given)."""
        with self._lock:
            return [r.json() for r in self.requests if path is None or r.path == path]
