"""Test helpers shared across test modules (once in tests.cli.test_token).

Helpers live only in tests/support: a test never imports another test module.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

STATUS = {
    "overall": "ok",
    "cards": [],
    "checks": [],
    "serving": {"state": "stopped"},
    "recovery": {},
}


class Recorder(ThreadingHTTPServer):
    """A loopback HTTP peer that records the Authorization header of every request."""

    def __init__(self, want_token: bool) -> None:
        self.seen: list[tuple[str, str | None]] = []
        self.want_token = want_token
        super().__init__(("127.0.0.1", 0), Handler)


class Handler(BaseHTTPRequestHandler):
    server: Recorder

    def _answer(self) -> None:
        auth = self.headers.get("Authorization")
        self.server.seen.append((self.command, auth))
        if self.server.want_token and auth is None:
            self.send_response(401)
            self.end_headers()
            return
        body = json.dumps(
            STATUS if self.path.startswith("/api/v1/status") else {"id": 1, "acked": True}
        )
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    do_GET = _answer  # noqa: N815 - http.server names
    do_POST = _answer  # noqa: N815 - http.server names

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(params=[False, True], ids=["loopback-rig", "token-everywhere-rig"])
def peer(request: pytest.FixtureRequest) -> Iterator[Recorder]:
    server = Recorder(want_token=request.param)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
