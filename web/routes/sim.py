"""Fault injection under ``--simulate``: an Xid, a card's readings, a host reboot.

Every route needs the simulation (404 on a real rig, before the token is even asked
for, as always) and the token.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel, ConfigDict, Field

from web.auth import TokenGuard
from web.errors import error_responses
from web.models import CardChangedDocument, SimRebootDocument, XidInjectedDocument
from web.services import SimulationControl, WebServices


class XidInjection(BaseModel):
    """``POST /api/v1/sim/xid`` body."""

    model_config = ConfigDict(extra="forbid")
    card: Annotated[int, Field(ge=0)]
    xid: Annotated[int, Field(ge=1, le=100000)]
    message: str | None = None


def router(services: WebServices, guard: TokenGuard) -> APIRouter:
    """The simulation routes, through ``services.sim``."""

    def simulation() -> SimulationControl:
        sim = services.sim
        if sim is None:
            raise HTTPException(404, "not simulating: start fleetd with --simulate")
        return sim

    routes = APIRouter(dependencies=[Depends(simulation), Depends(guard)])

    @routes.post(
        "/api/v1/sim/xid",
        response_model=XidInjectedDocument,
        response_model_exclude_unset=True,
        responses=error_responses(400, 404),
    )
    def sim_xid(body: XidInjection) -> dict[str, Any]:
        """Write a real-format NVRM Xid line into the simulated kernel log."""
        return simulation().inject_xid(body.card, body.xid, body.message)

    @routes.post(
        "/api/v1/sim/card/{index}",
        response_model=CardChangedDocument,
        response_model_exclude_unset=True,
        responses=error_responses(400, 404),
    )
    def sim_card(index: int, body: dict[str, Any]) -> dict[str, Any]:
        """Change a simulated card's readings, e.g. ``{"lost": true}``."""
        return simulation().set_card(index, body)

    @routes.post(
        "/api/v1/sim/reboot",
        response_model=SimRebootDocument,
        response_model_exclude_unset=True,
        responses=error_responses(404),
    )
    def sim_reboot() -> dict[str, Any]:
        """Simulate a host reboot (new boot id, caps back at default, fresh kernel log)."""
        return simulation().reboot()

    return routes
