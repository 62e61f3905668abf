"""Limits on fleetd's HTTP listener: idle and half-sent requests end, connections are capped.

1,100 connections that each sent part of a request once exhausted fleetd's descriptors
(uvicorn never times out a request head, nor a connection that sends nothing), and every
request then failed with a traceback (issue 22). Here: a connection waiting for (the rest
of) a request head longer than ``HEAD_TIMEOUT_S`` is closed, idle keep-alive connections
end after ``KEEP_ALIVE_S``, at most ``MAX_CONNECTIONS`` are served at once (uvicorn
answers 503 beyond) and a request head is at most ``MAX_HEAD_BYTES``. The unit's
``LimitNOFILE`` leaves room far above these.

Neither timer closes a connection whose client has already sent the next request: a
client reusing a kept-alive connection the moment its idle time runs out would otherwise
get "server disconnected without sending a response" (``bench/recovery_latency.py`` did,
once in three runs). Before closing, the socket is asked whether bytes are waiting; if
they are, the request is read and answered instead. A request sent after the close still
meets a closed connection, as with any HTTP server: clients retry such a request once.
"""

from __future__ import annotations

import asyncio
import select
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEAD_TIMEOUT_S = 10.0
KEEP_ALIVE_S = 5
MAX_CONNECTIONS = 256
MAX_HEAD_BYTES = 16 * 1024


class HeadTimeoutProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection that takes too long to send a request head.

    Checked every ``head_timeout_s``: a connection with no response under way whose
    client has not completed a request head since the last check is closed (a stream or a
    slow response keeps it open).
    """

    head_timeout_s = HEAD_TIMEOUT_S

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Arm the head timer with the connection."""
        super().connection_made(transport)
        self._head_so_far = b""  # a head received in parts, up to MAX_HEAD_BYTES
        self._head_refused = False
        self._head_timer: asyncio.TimerHandle | None = None
        self._arm()

    def _arm(self) -> None:
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._check_head)

    def _check_head(self) -> None:
        if self.transport.is_closing():
            return
        idle = self.cycle is None or self.cycle.response_complete
        if idle and self.conn.their_state is h11.IDLE and not request_waiting(self.transport):
            self.transport.close()  # nothing (or only part of a head) in head_timeout_s
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        """Refuse a request head over ``MAX_HEAD_BYTES``, however it arrives (431, closed).

        h11's own bound (``h11_max_incomplete_event_size``) counts only an *incomplete*
        head: one that arrives whole in a single segment was parsed and served whatever
        its size. While a head is awaited, the bytes up to its blank line are counted here.
        """
        if self._head_refused:
            return  # read and dropped until the client closes (or the head timer does)
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            head = self._head_so_far + data
            end = head.find(b"\r\n\r\n")
            if (end if end >= 0 else len(head)) > MAX_HEAD_BYTES:
                self._refuse_head()
                return
            self._head_so_far = b"" if end >= 0 else head
        else:
            self._head_so_far = b""
        super().data_received(data)

    def _refuse_head(self) -> None:
        body = f"request head over {MAX_HEAD_BYTES // 1024} KiB\n".encode()
        self.transport.write(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
            b"content-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
            + f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        # Half-closed, not closed: closing with the rest of the head unread would reset the
        # connection, and the client might lose the answer. The head timer ends it.
        self._head_refused = True
        self.transport.write_eof()

    def timeout_keep_alive_handler(self) -> None:
        """Close an idle kept-alive connection, unless the client's next request is here."""
        if request_waiting(self.transport):
            return  # read and answered now; the next idle spell arms the timer again
        super().timeout_keep_alive_handler()

    def connection_lost(self, exc: Exception | None) -> None:
        """Disarm the timer, then uvicorn's own cleanup."""
        if self._head_timer is not None:
            self._head_timer.cancel()
        super().connection_lost(exc)


def request_waiting(transport: asyncio.BaseTransport) -> bool:
    """True when bytes from the client wait in the socket, not yet read by the loop."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return False
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):  # closed meanwhile: nothing will be read
        return False
    return bool(readable)


def uvicorn_limits(head_timeout_s: float = HEAD_TIMEOUT_S) -> dict[str, Any]:
    """The ``uvicorn.Config`` keywords that bound the listener."""
    protocol = type("BoundedH11", (HeadTimeoutProtocol,), {"head_timeout_s": head_timeout_s})
    return {
        "http": protocol,
        "timeout_keep_alive": KEEP_ALIVE_S,
        "limit_concurrency": MAX_CONNECTIONS,
        "h11_max_incomplete_event_size": MAX_HEAD_BYTES,
    }
