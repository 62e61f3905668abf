"""The rig's drain: ``GET /api/v1/drain``, ``POST /api/v1/drain``, ``POST /api/v1/undrain``.

A drained rig's guard answers ``/health`` and every request with a 503 ``draining`` (with
``Retry-After``), so a load balancer in front of several rigs sends the traffic elsewhere
while requests already running finish within the grace (``daemon.engine.drain``). The
POSTs take the token. Without a drain keeper (a stand-in app) the routes answer 409.
"""

from __future__ import annotations

from typing import Any, Protocol

from fastapi import APIRouter, Depends

from serving.errors import Conflict
from web.auth import TokenGuard
from web.errors import error_responses
from web.models_drain import DrainDocument, DrainRequest


class DrainControl(Protocol):
    """What the API asks of the daemon's drain."""

    def document(self) -> dict[str, Any]:
        """The drain in force (the status's ``drain`` block)."""
        ...

    def drain(
        self, grace_s: float | None, by: str, reason: str = "", until_reboot: bool = False
    ) -> dict[str, Any]:
        """Begin a drain."""
        ...

    def undrain(self, by: str) -> dict[str, Any]:
        """End the drain."""
        ...


def router(drain: DrainControl | None, guard: TokenGuard) -> APIRouter:
    """The drain routes (POSTs: the token)."""
    routes = APIRouter()
    token = [Depends(guard)]

    def keeper() -> DrainControl:
        if drain is None:
            raise Conflict("this fleetd has no drain", "no_drain")
        return drain

    @routes.get("/api/v1/drain", response_model=DrainDocument, responses=error_responses(409))
    def drain_state() -> dict[str, Any]:
        """The drain in force, if any (the status's ``drain`` block)."""
        return keeper().document()

    @routes.post(
        "/api/v1/drain",
        dependencies=token,
        response_model=DrainDocument,
        responses=error_responses(400, 409),
    )
    def drain_begin(body: DrainRequest) -> dict[str, Any]:
        """Drain the rig: its guard's ``/health`` and new requests answer 503 ``draining``.

        Requests already running go on for ``grace_s`` (default ``[recovery]
        drain_grace_s``). Kept across fleetd restarts until ``POST /api/v1/undrain``.
        """
        return keeper().drain(body.grace_s, "api", body.reason)

    @routes.post(
        "/api/v1/undrain",
        dependencies=token,
        response_model=DrainDocument,
        responses=error_responses(409),
    )
    def drain_end() -> dict[str, Any]:
        """End the drain: the guard serves again (no drain in force: nothing changes)."""
        return keeper().undrain("api")

    return routes
