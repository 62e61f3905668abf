"""``POST /api/v1/caps/apply``: the configured power cap again (caps reset at every boot)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from web.auth import TokenGuard
from web.errors import error_responses
from web.models import CapsDocument
from web.services import WebServices


def router(services: WebServices, guard: TokenGuard) -> APIRouter:
    """The power-cap route (a write: every route here needs the token)."""
    routes = APIRouter(dependencies=[Depends(guard)])

    @routes.post(
        "/api/v1/caps/apply",
        response_model=CapsDocument,
        response_model_exclude_unset=True,
        responses=error_responses(503),
    )
    def caps_apply() -> dict[str, Any]:
        """Re-apply the configured power cap (caps reset at every boot)."""
        return services.apply_caps()

    return routes
