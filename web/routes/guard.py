"""The traffic guard's routes: ``GET /api/v1/guard`` and ``GET /api/v1/guard/usage``.

The daemon hands ``create_app`` an object satisfying ``GuardControl`` when ``[guard]`` is
configured (web never imports daemon); without one both routes answer 409 with a reason.
Keys are named, never shown: the documents carry the key's ``name`` from the config.
"""

from __future__ import annotations

from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict

from serving.errors import Conflict
from web.models import ErrorDocument


class GuardControl(Protocol):
    """What the API asks of the daemon's guard."""

    def overview(self) -> dict[str, Any]:
        """The guard's state, counters and recent sessions."""
        ...

    def usage(self, hours: int) -> list[dict[str, Any]]:
        """Tokens per key and hour over the last ``hours`` hours, oldest first."""
        ...


class _Doc(BaseModel):
    model_config = ConfigDict(extra="allow")


class GuardSessionDocument(_Doc):
    """One agent session as the guard saw it (``id``: a hash, never the conversation)."""

    id: str
    key: str
    first_seen: str
    last_seen: str
    requests: int
    depth_tokens: int
    max_depth_tokens: int
    signs: dict[str, int]
    leaks_last_hour: int
    loops_last_hour: int


class GuardOverviewDocument(_Doc):
    """``GET /api/v1/guard``: is it up, where, its counters and the last hour's sessions."""

    listen: str
    up: bool
    restarts: int
    counters: dict[str, float]
    signs: dict[str, float]
    sessions: list[GuardSessionDocument]
    leaks_last_hour: int
    loops_last_hour: int


class GuardUsageDocument(_Doc):
    """One key's use in one hour."""

    key: str
    hour: str
    requests: int
    prompt_tokens: int
    completion_tokens: int


def router(guard: GuardControl | None) -> APIRouter:
    """The routes around ``guard`` (``None``: not configured, both answer 409)."""
    router = APIRouter()
    errors: dict[int | str, dict[str, Any]] = {409: {"model": ErrorDocument}}

    def control() -> GuardControl:
        if guard is None:
            raise Conflict("the traffic guard is off on this rig: set [guard] listen", "no_guard")
        return guard

    @router.get(
        "/api/v1/guard",
        response_model=GuardOverviewDocument,
        responses=errors,
        tags=["guard"],
    )
    def guard_overview() -> dict[str, Any]:
        """The guard: up or not, its counters, and the sessions of the last hour."""
        return control().overview()

    @router.get(
        "/api/v1/guard/usage",
        response_model=list[GuardUsageDocument],
        responses=errors,
        tags=["guard"],
    )
    def guard_usage(
        hours: Annotated[int, Query(ge=1, le=24 * 7, description="how far back")] = 24,
    ) -> list[dict[str, Any]]:
        """Prompt and completion tokens per client key and hour (keys by name)."""
        return control().usage(hours)

    return router
