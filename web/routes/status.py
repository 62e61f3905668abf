"""The rig overview: ``GET /api/v1/status`` and its live form, ``GET /api/v1/stream`` (SSE).

Both serve the same shared render (``web.rendered``): never older than 0.2 s, and never
from before the last poll or API change. Which view a request reads (the engine's log
text only with the token) is ``web.status_views``'; the stream ends when fleetd shuts
down (``web.streams.StreamGate``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response, StreamingResponse

from web.models import StatusDocument
from web.status_views import StatusViews
from web.streams import RETRY_MS, SSE_HEADERS, SSE_MEDIA_TYPE, StreamGate, sse_frame, sse_responses


def router(views: StatusViews, gate: StreamGate) -> APIRouter:
    """The status document once, and pushed every ``interval_s`` until the reader leaves."""
    routes = APIRouter()

    @routes.get("/api/v1/status", response_model=StatusDocument, response_model_exclude_unset=True)
    async def status(request: Request) -> Response:
        """The rig overview (same document as ``fleetctl status --json``).

        Rendered at most a few times a second and shared by every reader (``web.rendered``);
        never older than 0.2 s, and never from before the last poll or API change.
        ``serving.last_log_line`` (engine output) only with the token (``web.status_views``).
        """
        document = views.for_request(request)
        return Response(await document.get(), media_type="application/json")

    async def status_frames(request: Request, interval_s: float) -> AsyncIterator[str]:
        yield f"retry: {RETRY_MS}\n\n"
        document = views.for_request(request)
        frame_id = 0
        while not gate.closing and not await request.is_disconnected():
            body = await document.get()
            frame_id += 1
            yield sse_frame("status", body.decode(), frame_id)
            await asyncio.sleep(interval_s)

    @routes.get(
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

    return routes
