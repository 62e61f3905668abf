"""Server-sent event streams: the live status (``GET /api/v1/stream``) and their shutdown.

A stream is a long response: uvicorn waits for it before it exits, so every stream
watches the app's ``StreamGate`` and ends when fleetd shuts down (``close_streams``),
and a client that left is noticed within a tick. Frames are plain SSE
(https://html.spec.whatwg.org/multipage/server-sent-events.html): ``retry:`` first, so a
browser's ``EventSource`` reconnects two seconds after a daemon restart, then one
``event:``/``id:``/``data:`` frame per message, ``data`` one line of JSON or text.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Annotated, Any

from fastapi import FastAPI, Query, Request
from fastapi.responses import StreamingResponse

from web.rendered import RenderedDocument

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


def install_status_stream(
    app: FastAPI, status_for: Callable[[Request], RenderedDocument], gate: StreamGate
) -> None:
    """``GET /api/v1/stream``: the status document, pushed every ``interval_s``.

    Frames carry the same shared render as ``GET /api/v1/status`` (``web.rendered``), in
    the view the request may read (``status_for``: the engine's log text with the token).
    """
    router = app.router

    async def status_frames(request: Request, interval_s: float) -> AsyncIterator[str]:
        yield f"retry: {RETRY_MS}\n\n"
        status = status_for(request)
        frame_id = 0
        while not gate.closing and not await request.is_disconnected():
            body = await status.get()
            frame_id += 1
            yield sse_frame("status", body.decode(), frame_id)
            await asyncio.sleep(interval_s)

    @router.get(
        "/api/v1/stream",
        response_class=StreamingResponse,
        responses=sse_responses(
            "Server-sent events: `retry: 2000`, then every `interval_s` one frame "
            "`id: N`, `event: status`, `data: <the /api/v1/status document as one JSON line>`."
        ),
    )
    async def status_stream(
        request: Request,
        interval_s: Annotated[float, Query(ge=0.2, le=60)] = 1.0,
    ) -> StreamingResponse:
        """The live status for the dashboard: the status document every ``interval_s``."""
        return StreamingResponse(
            status_frames(request, interval_s), media_type=SSE_MEDIA_TYPE, headers=SSE_HEADERS
        )
