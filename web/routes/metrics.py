"""``GET /metrics``: the rig in Prometheus' text format, over the app's own registry.

One render serves every scraper within 0.2 s, and none from before the last poll
(``web.rendered``); the families are the wings' collectors' (``web.metrics``).
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response
from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from web.metrics import CONTENT_TYPE
from web.rendered import RenderedDocuments


def router(registry: CollectorRegistry, documents: RenderedDocuments) -> APIRouter:
    """The ``/metrics`` route over the app's registry (the wings' collectors, none global)."""
    exposition = documents.add("metrics", lambda: generate_latest(registry))
    routes = APIRouter()

    @routes.get(
        "/metrics",
        response_class=Response,
        responses={200: {"content": {CONTENT_TYPE: {"schema": {"type": "string"}}}}},
        tags=["metrics"],
    )
    async def metrics() -> Response:
        """The rig in Prometheus text format (from memory: a scrape never touches NVML).

        One render serves every scraper within 0.2 s, and none from before the last poll.
        """
        return Response(await exposition.get(), media_type=CONTENT_TYPE)

    return routes
