"""``GET /metrics``: the rig in Prometheus' text format, over the app's own registry.

One render serves every scraper within 0.2 s, and none from before the last poll
(``web.rendered``); the families are ``web.metrics``'.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response
from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from web.metrics import CONTENT_TYPE, RigCollector
from web.metrics_model import MetricsSource
from web.rendered import RenderedDocuments


def router(source: MetricsSource, documents: RenderedDocuments) -> APIRouter:
    """The ``/metrics`` route over its own registry (no process-wide registry)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RigCollector(source))
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
