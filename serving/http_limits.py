"""Limits on a uvicorn listener: a bounded request head, a head timeout, idle ends, a cap.

Shared by fleetd's API (``daemon/api/http_limits.py``, on h11) and the traffic guard
(``serving/guard/main.py``, on httptools): one implementation, two parsers.

1,100 connections that each sent part of a request once exhausted fleetd's descriptors
(uvicorn never times out a request head, nor a connection that sends nothing: issue 22),
and four unauthenticated 100 MiB heads stalled the guard's loop until fleetd restarted it
(issue 36). Here, on either parser:

- a request head is at most ``MAX_HEAD_BYTES``: counted as it arrives, refused with a 431
  and the connection half-closed (httptools has no bound at all; h11's counts only an
  *incomplete* head, so a whole one in one segment was served whatever its size);
- a connection that sends nothing, or only part of a head, for ``head_timeout_s`` (since
  it opened, or since its last answer) is closed;
- an idle kept-alive connection ends after uvicorn's ``timeout_keep_alive``;
- uvicorn answers 503 beyond ``limit_concurrency`` connections.

None of these closes a connection with an answer under way (a stream that flows, a slow
response) or whose request body is still arriving. Neither timer closes a connection
whose client has already sent the next request: a client reusing a kept-alive connection
the moment its idle time runs out would otherwise get "server disconnected without
sending a response". Before closing, the socket is asked whether bytes are waiting; if
they are, the request is read and answered instead.
"""

from __future__ import annotations

import asyncio
import select
import time
from typing import Any, TypeVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

HEAD_TIMEOUT_S = 10.0
MAX_HEAD_BYTES = 16 * 1024
CHECKS_PER_TIMEOUT = 4  # the head timer's resolution: a quarter of the timeout
Bounded = TypeVar("Bounded", bound=asyncio.Protocol)


class HeadLimits:
    """A mixin placed before a uvicorn protocol class: the head limit and the head timer.

    The parser-specific part is :meth:`awaiting_head` (between requests or inside a head).
    """

    head_timeout_s = HEAD_TIMEOUT_S
    max_head_bytes = MAX_HEAD_BYTES
    # Provided by the uvicorn protocol this is mixed into.
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    cycle: Any

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Arm the head timer with the connection."""
        super().connection_made(transport)  # type: ignore[misc]
        self._head_so_far = b""  # a head received in parts, up to max_head_bytes
        self._head_refused = False
        self._served = False
        self._waiting_since_s = time.monotonic()
        self._head_timer: asyncio.TimerHandle | None = None
        self._arm()

    def awaiting_head(self) -> bool:
        """True between requests and while a request head is arriving."""
        raise NotImplementedError

    def head_refusal(self) -> tuple[bytes, bytes]:
        """The 431's content type and body (the guard answers in OpenAI's shape)."""
        body = f"request head over {self.max_head_bytes // 1024} KiB\n".encode()
        return b"text/plain; charset=utf-8", body

    def _arm(self) -> None:
        self._head_timer = self.loop.call_later(
            self.head_timeout_s / CHECKS_PER_TIMEOUT, self._check_head
        )

    def _check_head(self) -> None:
        if self.transport.is_closing():
            return
        answering = self.cycle is not None and not self.cycle.response_complete
        late = time.monotonic() - self._waiting_since_s >= self.head_timeout_s
        # Waiting on the client: nothing yet, part of a head, or after a refused one. An
        # idle kept-alive connection is uvicorn's keep-alive timer's to end.
        stalled = self._head_refused or (
            not answering and self.awaiting_head() and (self._head_so_far or not self._served)
        )
        if stalled and late and not request_waiting(self.transport):
            self.transport.close()
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        """Refuse a request head over ``max_head_bytes``, however it arrives (431, closed)."""
        if self._head_refused:
            return  # read and dropped until the client closes (or the head timer does)
        if self.awaiting_head() and not self.transport.is_closing():
            head = self._head_so_far + data
            end = head.find(b"\r\n\r\n")
            if (end if end >= 0 else len(head)) > self.max_head_bytes:
                self._head_so_far = b""
                self._refuse_head()
                return
            self._head_so_far = b"" if end >= 0 else head
        else:
            self._head_so_far = b""
        super().data_received(data)  # type: ignore[misc]

    def _refuse_head(self) -> None:
        kind, body = self.head_refusal()
        self.transport.write(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
            b"content-type: "
            + kind
            + b"\r\nconnection: close\r\n"
            + f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        # Half-closed, not closed: closing with the rest of the head unread would reset the
        # connection, and the client might lose the answer. The head timer ends it.
        self._head_refused = True
        self._waiting_since_s = time.monotonic()
        self.transport.write_eof()

    def on_response_complete(self) -> None:
        """An answer went out: the wait for the next head starts now."""
        self._served = True
        self._waiting_since_s = time.monotonic()
        super().on_response_complete()  # type: ignore[misc]

    def timeout_keep_alive_handler(self) -> None:
        """Close an idle kept-alive connection, unless the client's next request is here."""
        if request_waiting(self.transport):
            return  # read and answered now; the next idle spell arms the timer again
        super().timeout_keep_alive_handler()  # type: ignore[misc]

    def connection_lost(self, exc: Exception | None) -> None:
        """Disarm the timer, then uvicorn's own cleanup."""
        if self._head_timer is not None:
            self._head_timer.cancel()
        super().connection_lost(exc)  # type: ignore[misc]


class BoundedH11(HeadLimits, H11Protocol):
    """uvicorn's h11 protocol with the limits (fleetd's API)."""

    def awaiting_head(self) -> bool:
        """h11 says so: the client's side is idle until a head is complete."""
        return bool(self.conn.their_state is h11.IDLE)


class BoundedHttpTools(HeadLimits, HttpToolsProtocol):
    """uvicorn's httptools protocol with the limits (the guard: the faster parser)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """A new connection waits for a head."""
        self._in_body = False
        super().connection_made(transport)

    def awaiting_head(self) -> bool:
        """Not between a head's end and its message's end."""
        return not self._in_body

    def on_headers_complete(self) -> None:
        """The head is in: its body (if any) follows."""
        self._in_body = True
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        """The request is in: the next bytes are the next head."""
        self._in_body = False
        super().on_message_complete()


def request_waiting(transport: asyncio.BaseTransport) -> bool:
    """True when bytes from the client wait in the socket, not yet read by the loop."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return False
    try:
        poller = select.poll()  # not select(): a guard's descriptors pass 1024
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):  # closed meanwhile: nothing will be read
        return False


def bounded(base: type[Bounded], head_timeout_s: float, **overrides: Any) -> type[Bounded]:
    """``base`` with this listener's head timeout (and other class attributes)."""
    return type(base.__name__, (base,), {"head_timeout_s": head_timeout_s, **overrides})
