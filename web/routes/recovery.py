"""The reboot the latch asks for, and a person's clear of the latch.

``GET /api/v1/recovery/reboot`` explains what a confirmed reboot would do (it changes
nothing: no token on loopback); ``POST`` with ``confirm`` stops the engine cleanly, then
reboots (409 when the engine would not stop); ``POST /api/v1/recovery/clear`` is the
recorded operator override of the latch.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from web.auth import TokenGuard
from web.errors import error_responses
from web.models import ClearLatchDocument, ClearLatchRequest, RebootDocument, RebootRequest
from web.services import WebServices


def router(services: WebServices, guard: TokenGuard) -> APIRouter:
    """The recovery routes, through ``services`` (POSTs: the token)."""
    routes = APIRouter()
    token = [Depends(guard)]

    @routes.get(
        "/api/v1/recovery/reboot",
        response_model=RebootDocument,
        response_model_exclude_unset=True,
    )
    def recovery_reboot_plan(cold: bool = False) -> dict[str, Any]:
        """What a confirmed reboot would do now (changes nothing, so no token on loopback).

        What ``fleetctl reboot [--cold]`` without ``--confirm`` shows (``cold``: a power cycle).
        """
        return services.recovery_reboot(False, cold)

    @routes.post(
        "/api/v1/recovery/reboot",
        dependencies=token,
        response_model=RebootDocument,
        response_model_exclude_unset=True,
        responses=error_responses(409),
    )
    def recovery_reboot(body: RebootRequest) -> dict[str, Any]:
        """Explain the reboot; with ``confirm``, stop the engine cleanly, then reboot.

        409 when the engine would not stop (then nothing is rebooted).
        """
        return services.recovery_reboot(body.confirm, body.cold, body.force)

    @routes.post(
        "/api/v1/recovery/clear",
        dependencies=token,
        response_model=ClearLatchDocument,
        response_model_exclude_unset=True,
        responses=error_responses(400),
    )
    def recovery_clear(body: ClearLatchRequest) -> dict[str, Any]:
        """Clear the reboot-required latch (the recorded operator override)."""
        return services.recovery_clear(body.reason)

    return routes
