"""The listener ends connections that send nothing or half a request head (issue 22).

A real uvicorn (fleetd's ``ApiServer``) on a loopback port, real sockets.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from fastapi import FastAPI

from daemon.api.http_limits import MAX_CONNECTIONS, request_waiting, uvicorn_limits
from daemon.api.server import ApiServer
from tests.support import loopback
from tests.support.fleetd import free_port

HEAD_TIMEOUT_S = 0.5


@pytest.fixture(scope="module")
def server() -> Iterator[ApiServer]:
    app = FastAPI()

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    api = ApiServer(f"127.0.0.1:{free_port()}", head_timeout_s=HEAD_TIMEOUT_S)
    api.start(app)
    api.wait_ready(threading.Event(), 20)
    yield api
    api.stop()


def closed_after_s(sock: socket.socket, limit_s: float, began_s: float | None = None) -> float:
    """Seconds until the server closes ``sock`` (an empty read), failing after ``limit_s``.

    ``began_s``: from when (default now). A test of a lower bound counts from before the
    connection: the server's timer starts at its accept, and a loaded machine may run the
    client's next line much later (0.39 s of a 0.5 s timeout were seen at load 10).
    """
    began_s = time.monotonic() if began_s is None else began_s
    sock.settimeout(limit_s)
    assert sock.recv(1024) == b"", "the server answered instead of closing"
    return time.monotonic() - began_s


@pytest.mark.parametrize("sent", [b"", b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"])
def test_a_connection_without_a_whole_request_head_is_closed(
    server: ApiServer, sent: bytes
) -> None:
    began_s = time.monotonic()
    with socket.create_connection((server.host, server.port)) as sock:
        sock.sendall(sent)
        assert closed_after_s(sock, 10 * HEAD_TIMEOUT_S + 5, began_s) >= HEAD_TIMEOUT_S * 0.9
    assert loopback.get(f"http://{server.host}:{server.port}/healthz").status_code == 200


def test_a_whole_request_is_served_and_the_idle_connection_then_ends(server: ApiServer) -> None:
    with socket.create_connection((server.host, server.port)) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        sock.settimeout(5)
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        closed_after_s(sock, 20)


def test_the_listener_is_bounded() -> None:
    limits = uvicorn_limits()
    assert limits["limit_concurrency"] == MAX_CONNECTIONS < 1024  # below a default ulimit
    assert limits["timeout_keep_alive"] > 0
    assert limits["h11_max_incomplete_event_size"] == 16 * 1024


def _answer(server: ApiServer, request: bytes) -> bytes:
    """What the server sends back for ``request`` sent in one ``sendall``, until it closes."""
    with socket.create_connection((server.host, server.port)) as sock:
        sock.sendall(request)
        sock.settimeout(10)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
            if b"\r\n\r\n" in received and b"200 OK" in received:
                break  # a served request's connection stays open (keep-alive)
        return received


@pytest.mark.parametrize("pad_kib", [17, 100])
def test_a_request_head_over_16_kib_in_one_segment_is_refused(
    server: ApiServer, pad_kib: int
) -> None:
    """h11 bounds only an incomplete head: a whole one in one segment used to be served."""
    padding = b"x" * (pad_kib * 1024)
    head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + padding + b"\r\n\r\n"
    answer = _answer(server, head)
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert b"request head over 16 KiB" in answer


def test_a_head_under_the_limit_in_one_segment_is_served(server: ApiServer) -> None:
    padding = b"x" * (15 * 1024)
    head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + padding + b"\r\n\r\n"
    assert _answer(server, head).startswith(b"HTTP/1.1 200")


class SocketTransport(asyncio.BaseTransport):
    """A transport that is only its socket (what the timers ask it)."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self._sock = sock

    def get_extra_info(self, name: str, default: object = None) -> object:
        return self._sock if name == "socket" else default


def test_a_connection_with_the_next_request_waiting_is_not_closed_as_idle() -> None:
    """The race behind "server disconnected without sending a response": the timer fires
    after the client reused the connection; its bytes are in the socket, so it is kept."""
    server_end, client_end = socket.socketpair()
    with server_end, client_end:
        transport = SocketTransport(server_end)
        assert not request_waiting(transport)  # idle: the timers may close it
        client_end.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert request_waiting(transport)  # a request is here: read and answer it
    assert not request_waiting(SocketTransport(server_end))  # closed: nothing to wait for
