"""``GET|HEAD /healthz``: the daemon answers, with cmpfleet's version (never needs the token)."""

from __future__ import annotations

from fastapi import APIRouter

from web.models import HealthDocument
from web.version import __version__


def router() -> APIRouter:
    """``/healthz`` for systemd-style checks, load balancers and uptime checkers."""
    routes = APIRouter()

    @routes.get("/healthz", response_model=HealthDocument)
    def healthz() -> dict[str, str]:
        """200 once the daemon runs, with cmpfleet's version."""
        return {"status": "ok", "version": __version__}

    # HEAD for load balancers and uptime checkers that never read a body.
    routes.add_api_route(
        "/healthz",
        healthz,
        methods=["HEAD"],
        response_model=HealthDocument,
        operation_id="healthz_head",
        summary="Healthz (HEAD)",
    )
    return routes
