"""A loopback HTTP peer answering every GET and POST with one JSON document, recording each.

For fleetctl tests that need fleetd's answers but not fleetd (what a command sends, how it
prints a known document): start one with ``json_peer(document)``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


class JsonPeer(ThreadingHTTPServer):
    """The server: ``document`` for every request; ``queries`` each GET's query string,
    ``posts`` each POST's path and JSON body."""

    def __init__(self, document: Any) -> None:
        self.document = document
        self.queries: list[dict[str, list[str]]] = []
        self.posts: list[tuple[str, Any]] = []
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        """Base URL (``http://127.0.0.1:PORT``)."""
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: JsonPeer

    def do_GET(self) -> None:
        self.server.queries.append(parse_qs(urlsplit(self.path).query))
        self._answer()

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        self.server.posts.append((urlsplit(self.path).path, json.loads(raw) if raw else None))
        self._answer()

    def _answer(self) -> None:
        body = json.dumps(self.server.document).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def json_peer(document: Any) -> Iterator[JsonPeer]:
    """A running peer for the block."""
    server = JsonPeer(document)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
