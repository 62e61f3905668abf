"""The status's ``drain`` block and the drain's request body (``daemon.engine.drain``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class DrainDocument(BaseModel):
    """The rig's drain: while ``draining``, the guard answers every request with a 503."""

    model_config = ConfigDict(extra="allow")

    draining: bool
    since: str | None = Field(description="when it began (ISO 8601, UTC)")
    grace_s: float | None = Field(description="how long running requests have")
    grace_left_s: float | None
    by: str | None = Field(description="who began it: api, fleetctl's actor, or the reboot")
    reason: str | None
    until_reboot: bool = Field(description="begun by a confirmed reboot: ends after the boot")
    in_flight: int | None = Field(description="requests the guard serves (None: no guard)")
    quiet: bool = Field(description="the guard took the drain and serves no request")


class DrainRequest(BaseModel):
    """``POST /api/v1/drain``: the grace (default ``[recovery] drain_grace_s``) and why."""

    model_config = ConfigDict(extra="forbid")

    grace_s: float | None = Field(default=None, ge=0, le=86400)
    reason: str = Field(default="", max_length=200)
