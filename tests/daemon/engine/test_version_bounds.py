"""``GET /version`` is read bounded: by size and by total time (issue 36).

A fake engine at the HTTP boundary (a raw socket): one that answers 300 MB, one that
trickles a byte at a time, one whose version carries an escape sequence and a newline.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from daemon.engine.builds import engine_version
from serving.runtime.provenance import VERSION_MAX_BYTES

Answer = Callable[[socket.socket], None]


@contextlib.contextmanager
def fake_engine(answer: Answer) -> Iterator[str]:
    """Serve ``answer`` to each connection after reading its request head."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def one(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            received = b""
            while b"\r\n\r\n" not in received:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                received += chunk
            answer(conn)

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=one, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(10)


def _head(length: int | None) -> bytes:
    sized = f"content-length: {length}\r\n" if length is not None else ""
    return f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{sized}\r\n".encode()


def test_a_300_mb_answer_is_refused_after_the_cap() -> None:
    sent: list[int] = []

    def huge(conn: socket.socket) -> None:
        total = 300 * 1024 * 1024
        conn.sendall(_head(total) + b'{"version": "')
        block = b"9" * (1024 * 1024)
        for _ in range(300):
            conn.sendall(block)
            sent.append(len(block))

    with fake_engine(huge) as url:
        version, why = engine_version(url, timeout_s=20)
    assert version is None
    assert f"over {VERSION_MAX_BYTES // 1024} KiB" in why
    assert sum(sent) < 50 * 1024 * 1024, "the whole answer was read"


def test_a_trickling_answer_ends_at_the_total_timeout() -> None:
    def trickle(conn: socket.socket) -> None:
        conn.sendall(_head(None) + b'{"version": ')
        for _ in range(200):
            conn.sendall(b" ")
            time.sleep(0.05)  # the fake's pace (the product's clock is what is tested)

    with fake_engine(trickle) as url:
        began_s = time.monotonic()
        version, why = engine_version(url, timeout_s=1.0)
        took_s = time.monotonic() - began_s
    assert version is None
    assert "took over 1 s" in why
    assert took_s < 5, f"the trickle held it {took_s:.1f} s"


@pytest.mark.parametrize("raw", ['"0.11\\n\\u001b[2Jforged"'])
def test_a_version_with_controls_comes_back_escaped(raw: str) -> None:
    body = ('{"version": ' + raw + "}").encode()

    def answer(conn: socket.socket) -> None:
        conn.sendall(_head(len(body)) + body)

    with fake_engine(answer) as url:
        version, why = engine_version(url)
    assert why == ""
    assert version == "0.11\\x0a\\x1b[2Jforged"
