"""Server-sent event streams: their frames and their shutdown.

The live status (``web.routes.status``) and the engine log (``web.routes.logs``) stream.
A stream is a long response: uvicorn waits for it before it exits, so every stream
watches the app's ``StreamGate`` and ends when fleetd shuts down (``close_streams``),
and a client that left is noticed within a tick. Frames are plain SSE
(https://html.spec.whatwg.org/multipage/server-sent-events.html): ``retry:`` first, so a
browser's ``EventSource`` reconnects two seconds after a daemon restart, then one
``event:``/``id:``/``data:`` frame per message, ``data`` one line of JSON or text.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI

RETRY_MS = 2000
SSE_MEDIA_TYPE = "text/event-stream"
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class StreamGate:
    """Set once when the server shuts down: every open stream ends at its next tick."""

    def __init__(self) -> None:
        self._closing = threading.Event()

    def close(self) -> None:
        """End every stream (called before the server is asked to exit)."""
        self._closing.set()

    @property
    def closing(self) -> bool:
        """True once the server shuts down."""
        return self._closing.is_set()


def close_streams(app: FastAPI) -> None:
    """End the app's open streams so the server can exit without waiting on them."""
    gate = getattr(app.state, "stream_gate", None)
    if isinstance(gate, StreamGate):
        gate.close()


def sse_frame(event: str, data: str, frame_id: int | None = None) -> str:
    """One SSE frame; ``data`` must be one line (JSON, or a log line with CR removed)."""
    head = f"id: {frame_id}\n" if frame_id is not None else ""
    return f"{head}event: {event}\ndata: {data}\n\n"


def sse_responses(description: str) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for an SSE route."""
    return {
        200: {
            "description": description,
            "content": {SSE_MEDIA_TYPE: {"schema": {"type": "string"}}},
        }
    }


def line_frames(lines: Iterator[str | None], gate: StreamGate) -> Iterator[str]:
    """Log lines as ``event: line`` frames; a quiet second sends a comment (keeps it open)."""
    yield f"retry: {RETRY_MS}\n\n"
    for line in lines:
        if gate.closing:
            return
        yield ": quiet\n\n" if line is None else sse_frame("line", line.replace("\r", ""))
