"""The simulated engine on the wire behaves like vLLM's uvicorn: no Nagle stall.

A reply whose header and body leave in two writes, on a socket without ``TCP_NODELAY``,
makes a keep-alive client wait out Nagle against its delayed ACK (about 40 ms a request,
measured on loopback). Timings flake under load, so the test counts what the
server hands the kernel instead: one ``send`` per non-streaming reply, on a socket with
``TCP_NODELAY`` set. The Nagle case (the stdlib handler's own two writes) is the control.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from serving.sim.core import EngineLog, SimEngine
from serving.sim.handler import EngineHandler, EngineServer
from serving.sim.options import parse_options


class CountingSocket(socket.socket):
    """An accepted connection that counts the writes the server makes on it."""

    sends = 0
    nodelay = True  # every write went out with ``TCP_NODELAY`` set

    def _count(self) -> None:
        self.sends += 1
        self.nodelay = self.nodelay and bool(
            self.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        )

    def send(self, data: Any, flags: int = 0) -> int:
        self._count()
        return super().send(data, flags)

    def sendall(self, data: Any, flags: int = 0) -> None:
        self._count()
        super().sendall(data, flags)


class UnbufferedHandler(EngineHandler):
    """The engine's handler as it was: one write for the header, one for the body."""

    wbufsize = 0


class CountingServer(EngineServer):
    """The engine's server, keeping each accepted connection (as a counting socket)."""

    accepted: list[CountingSocket]

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = super().get_request()
        counted = CountingSocket(sock.family, sock.type, sock.proto, fileno=sock.detach())
        self.accepted.append(counted)
        return counted, address


@pytest.fixture
def engine_port() -> Iterator[tuple[CountingServer, int]]:
    options = parse_options(["serve", "m", "--port", "8000", "--sim-tokens-per-s", "100000"])
    engine = SimEngine(options, EngineLog())
    engine.ready.set()
    server = CountingServer(("127.0.0.1", 0), engine)
    server.accepted = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _chat(conn: http.client.HTTPConnection) -> dict[str, Any]:
    body = json.dumps(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    )
    conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    response = conn.getresponse()
    assert response.status == 200
    answer: dict[str, Any] = json.loads(response.read())
    return answer


def test_a_non_streaming_reply_leaves_in_one_write_with_nodelay(
    engine_port: tuple[CountingServer, int],
) -> None:
    server, port = engine_port
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        for _ in range(3):  # keep-alive: the same connection each time
            assert _chat(conn)["choices"][0]["finish_reason"] in ("length", "stop")
        conn.request("GET", "/health")
        assert conn.getresponse().read() == b""
    finally:
        conn.close()
    assert len(server.accepted) == 1, "the client kept its connection alive"
    sock = server.accepted[0]
    assert sock.sends == 4, "one write per reply: header and body together"
    assert sock.nodelay


def test_the_control_unbuffered_handler_writes_header_and_body_apart(
    engine_port: tuple[CountingServer, int],
) -> None:
    """The Nagle case: the stdlib's unbuffered writer (the engine before) writes twice."""
    server, port = engine_port
    server.RequestHandlerClass = UnbufferedHandler
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        _chat(conn)
    finally:
        conn.close()
    assert server.accepted[0].sends == 2
