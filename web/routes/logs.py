"""The engine log over HTTP: the tail as JSON or text, and followed as text or SSE.

The log can hold users' prompts, so every route here needs the token. Following holds a
worker thread per reader; the engine service caps how many (429 beyond that) and yields
``None`` each quiet second so a reader who left is noticed and its thread freed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import PlainTextResponse, StreamingResponse

from web.auth import TokenGuard
from web.errors import error_responses
from web.models import LogsDocument
from web.services import WebServices
from web.streams import SSE_HEADERS, SSE_MEDIA_TYPE, StreamGate, line_frames, sse_responses

Lines = Annotated[int, Query(ge=0, le=100000, description="how many of the last lines")]


def text_chunks(lines: Iterator[str | None], gate: StreamGate) -> Iterator[str]:
    """Followed lines as text; a quiet second sends nothing but hands control back."""
    for line in lines:
        if gate.closing:
            return
        yield "" if line is None else line + "\n"


def router(services: WebServices, gate: StreamGate, guard: TokenGuard) -> APIRouter:
    """``/api/v1/serving/logs`` and its text, follow and stream forms (every one: the token)."""
    routes = APIRouter(dependencies=[Depends(guard)])

    @routes.get("/api/v1/serving/logs", response_model=LogsDocument, responses=error_responses(404))
    def serving_logs(lines: Lines = 200, engine: str | None = None) -> dict[str, Any]:
        """The engine log's last lines (JSON); ``engine``: which engine, by its profile."""
        named = {} if engine is None else {"engine": engine}
        return {"lines": services.serving_logs(lines, **named)}

    @routes.get(
        "/api/v1/serving/logs/text",
        response_class=PlainTextResponse,
        responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
    )
    def serving_logs_text(lines: Lines = 200) -> PlainTextResponse:
        """The engine log's last lines as plain text, one per line."""
        tail = services.serving_logs(lines)
        return PlainTextResponse("".join(line + "\n" for line in tail))

    @routes.get(
        "/api/v1/serving/logs/follow",
        response_class=StreamingResponse,
        responses={
            200: {"content": {"text/plain": {"schema": {"type": "string"}}}},
            **error_responses(404, 409, 429),
        },
    )
    def serving_logs_follow(lines: Lines = 50, engine: str | None = None) -> StreamingResponse:
        """The engine log's last lines, then new lines as they come (text/plain stream)."""
        named = {} if engine is None else {"engine": engine}
        stream = services.serving_follow(lines, **named)
        return StreamingResponse(text_chunks(stream, gate), media_type="text/plain")

    @routes.get(
        "/api/v1/serving/logs/stream",
        response_class=StreamingResponse,
        responses={
            **sse_responses(
                "Server-sent events: `retry: 2000`, then one frame `event: line`, "
                "`data: <the log line>` per line (the last `lines` first); a quiet second "
                "sends a `: quiet` comment."
            ),
            **error_responses(409, 429),
        },
    )
    def serving_logs_stream(lines: Lines = 50) -> StreamingResponse:
        """The engine log's last lines, then new ones, as server-sent events."""
        stream = services.serving_follow(lines)
        return StreamingResponse(
            line_frames(stream, gate), media_type=SSE_MEDIA_TYPE, headers=SSE_HEADERS
        )

    return routes
