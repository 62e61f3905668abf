"""The canary routes: ``GET /api/v1/canary`` and ``POST /api/v1/canary/run``.

The daemon hands ``create_app`` an object satisfying ``CanaryControl`` (web never imports
daemon); without one (no engine configured) the routes answer 409 with a reason. Running
a round is a POST: it needs the token.
"""

from __future__ import annotations

from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, ConfigDict, Field

from serving.errors import Conflict
from web.auth import TokenGuard
from web.models import CanaryOverviewDocument, CanaryRunDocument, ErrorDocument


class CanaryControl(Protocol):
    """What the API asks of the daemon's canaries."""

    def status_entries(self) -> list[dict[str, Any]]:
        """Each canary's last result: ``{name, result, figure, advice, ts}`` and extras."""
        ...

    def log_signature_entries(self) -> list[dict[str, Any]]:
        """Each log signature's counts."""
        ...

    def canary_document(self, limit: int) -> dict[str, Any]:
        """Last results, signature counts and recent history."""
        ...

    def run_canaries(
        self, force: bool, deep: bool = False, engine: str | None = None
    ) -> dict[str, Any]:
        """Run one round now on ``engine`` (None: the primary; ``deep``: the deep round).

        ``Conflict`` when not ready; ``NotFound`` for a NAME no engine here runs.
        """
        ...


class CanaryRunRequest(BaseModel):
    """``POST /api/v1/canary/run`` body (optional)."""

    model_config = ConfigDict(extra="forbid")
    force: bool = False
    deep: bool = False
    engine: str | None = Field(
        None,
        min_length=1,
        max_length=64,
        description="the engine's profile ([serving] run); default the primary engine",
    )


def router(canary: CanaryControl | None, guard: TokenGuard) -> APIRouter:
    """The routes around ``canary`` (``None``: no engine, every route answers 409)."""
    routes = APIRouter()
    token = [Depends(guard)]
    errors: dict[int | str, dict[str, Any]] = {409: {"model": ErrorDocument}}
    run_errors: dict[int | str, dict[str, Any]] = {**errors, 404: {"model": ErrorDocument}}

    def control() -> CanaryControl:
        if canary is None:
            raise Conflict("no engine is configured on this rig: no canaries", "no_engine")
        return canary

    @routes.get(
        "/api/v1/canary",
        response_model=CanaryOverviewDocument,
        response_model_exclude_unset=True,
        responses=errors,
    )
    def canary_overview(
        limit: Annotated[int, Query(ge=1, le=1000)] = 40,
    ) -> dict[str, Any]:
        """The canaries' last results, log-signature counts and recent history."""
        return control().canary_document(limit)

    @routes.post(
        "/api/v1/canary/run",
        dependencies=token,
        response_model=CanaryRunDocument,
        response_model_exclude_unset=True,
        responses=run_errors,
    )
    def canary_run(body: CanaryRunRequest | None = None) -> dict[str, Any]:
        """Run every canary now (skipped while the engine is busy unless ``force``).

        ``deep``: the deep round (copy and recall at ``[canary] depths``, the loop canary,
        determinism) instead of the short one. ``engine``: the engine to judge, by its
        profile (several engines: ``[serving] run``), default the primary.
        """
        return control().run_canaries(
            bool(body and body.force), bool(body and body.deep), body.engine if body else None
        )

    return routes
