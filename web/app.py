"""The FastAPI application: ``/healthz``, the ``/api/v1`` REST API and simulation control.

Reads come from the daemon's in-memory state (never a live NVML call in a request), so
a slow GPU cannot stall the API. Every POST needs ``Authorization: Bearer <token>`` (401
without, 403 with a wrong one), and so does the engine log (it can hold users' prompts:
not for every local user); on a non-loopback listener every endpoint but ``/healthz`` does.
Every route declares its response model (``web.models``), so ``/openapi.json`` documents
every body; request bodies are capped (``web.limits``).
"""

from __future__ import annotations

from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from web.auth import bearer, token_matches
from web.canary import CanaryControl, canary_router
from web.dashboard_routes import install_dashboard
from web.errors import install_error_handlers
from web.history import history_router
from web.limits import MAX_BODY_BYTES, BodyLimit
from web.metrics import metrics_router
from web.metrics_model import MetricsSource
from web.models import (
    AckDocument,
    CapsDocument,
    CardChangedDocument,
    ErrorDocument,
    EventDocument,
    HealthDocument,
    LogsDocument,
    RecipeDocument,
    ServingActionDocument,
    SimRebootDocument,
    StatusDocument,
    XidInjectedDocument,
)
from web.services import SimulationControl, WebServices


class XidInjection(BaseModel):
    """``POST /api/v1/sim/xid`` body."""

    model_config = ConfigDict(extra="forbid")
    card: Annotated[int, Field(ge=0)]
    xid: Annotated[int, Field(ge=1, le=100000)]
    message: str | None = None


class RebootRequest(BaseModel):
    """``POST /api/v1/recovery/reboot`` body."""

    model_config = ConfigDict(extra="forbid")
    confirm: bool = False


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for domain refusals: each answers an ``ErrorDocument``."""
    return {status: {"model": ErrorDocument} for status in statuses}


def package_version() -> str:
    """cmpfleet's installed version."""
    try:
        return version("cmpfleet")
    except PackageNotFoundError:
        return "0+unknown"


def create_app(
    services: WebServices,
    max_body_bytes: int = MAX_BODY_BYTES,
    *,
    metrics: MetricsSource | None = None,
    canary: CanaryControl | None = None,
) -> FastAPI:
    """Build the app around ``services`` (no globals: everything hangs off this closure).

    ``metrics`` serves ``/metrics`` (the daemon always passes it; a test of other routes
    may leave it out). ``canary`` serves the canary routes (409 without one: no engine).
    """
    app = FastAPI(
        title="cmpfleet",
        version=package_version(),
        description="Rig supervisor for NVIDIA CMP 170HX inference rigs.",
    )

    def check_token(request: Request) -> None:
        given = bearer(request)
        if given is None:
            raise HTTPException(401, "missing bearer token", headers={"WWW-Authenticate": "Bearer"})
        if not token_matches(services.token, given):
            raise HTTPException(403, "wrong token")

    def require_token(request: Request) -> None:
        check_token(request)

    def require_sim() -> SimulationControl:
        sim = services.sim
        if sim is None:
            raise HTTPException(404, "not simulating: start fleetd with --simulate")
        return sim

    @app.middleware("http")
    async def remote_needs_token(request: Request, call_next: Any) -> Any:
        if not services.loopback_only and request.url.path != "/healthz":
            try:
                check_token(request)
            except HTTPException as exc:
                return JSONResponse({"detail": exc.detail}, exc.status_code, exc.headers)
        return await call_next(request)

    # Added last, so outermost: a body over the cap is refused before anything reads it.
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    install_error_handlers(app)
    if metrics is not None:
        app.include_router(metrics_router(metrics))

    install_dashboard(app)
    app.include_router(history_router(services))

    @app.get("/healthz", response_model=HealthDocument)
    def healthz() -> dict[str, str]:
        """200 once the daemon runs."""
        return {"status": "ok"}

    @app.get("/api/v1/status", response_model=StatusDocument, response_model_exclude_unset=True)
    def status() -> dict[str, Any]:
        """The rig overview (same document as ``fleetctl status --json``)."""
        return services.status_document()

    @app.get(
        "/api/v1/events",
        response_model=list[EventDocument],
        response_model_exclude_unset=True,
        responses=_errors(400),
    )
    def events(
        since: datetime | None = None,
        kind: str | None = None,
        card: Annotated[int | None, Query(ge=0)] = None,
        limit: Annotated[int, Query(ge=1, le=10000)] = 100,
    ) -> list[dict[str, Any]]:
        """Events, newest first."""
        return services.list_events(since, kind, limit, card)

    @app.post(
        "/api/v1/events/{event_id}/ack",
        dependencies=[Depends(require_token)],
        response_model=AckDocument,
        response_model_exclude_unset=True,
        responses=_errors(404),
    )
    def ack(event_id: int) -> dict[str, Any]:
        """Acknowledge one event."""
        return services.ack_event(event_id, "api")

    @app.post(
        "/api/v1/caps/apply",
        dependencies=[Depends(require_token)],
        response_model=CapsDocument,
        response_model_exclude_unset=True,
        responses=_errors(503),
    )
    def caps_apply() -> dict[str, Any]:
        """Re-apply the configured power cap (caps reset at every boot)."""
        return services.apply_caps()

    @app.post(
        "/api/v1/serving/{action}",
        dependencies=[Depends(require_token)],
        response_model=ServingActionDocument,
        response_model_exclude_unset=True,
        responses=_errors(409, 503),
    )
    def serving(action: Literal["start", "stop", "restart"]) -> dict[str, Any]:
        """Start, stop or restart the engine (409 with the reason and its code when refused)."""
        return services.serving_action(action)

    @app.get(
        "/api/v1/serving/logs", dependencies=[Depends(require_token)], response_model=LogsDocument
    )
    def serving_logs(lines: Annotated[int, Query(ge=0, le=100000)] = 200) -> dict[str, Any]:
        """The engine log's last lines."""
        return {"lines": services.serving_logs(lines)}

    @app.get(
        "/api/v1/serving/logs/follow",
        dependencies=[Depends(require_token)],
        response_class=StreamingResponse,
        responses={
            200: {"content": {"text/plain": {"schema": {"type": "string"}}}},
            **_errors(409, 429),
        },
    )
    def serving_logs_follow(
        lines: Annotated[int, Query(ge=0, le=100000)] = 50,
    ) -> StreamingResponse:
        """The engine log's last lines, then new lines as they come (text/plain stream)."""
        stream = services.serving_follow(lines)
        # None marks a quiet second: send nothing, but hand control back so a reader who
        # left is noticed and the worker thread freed.
        chunks = ("" if line is None else line + "\n" for line in stream)
        return StreamingResponse(chunks, media_type="text/plain")

    @app.get(
        "/api/v1/serving/recipe",
        response_model=RecipeDocument,
        response_model_exclude_unset=True,
        responses=_errors(409),
    )
    def serving_recipe() -> dict[str, Any]:
        """The argv and environment the daemon would launch; diff to the last ready launch."""
        return services.serving_recipe()

    app.include_router(canary_router(canary, require_token))

    sim_only = [Depends(require_sim), Depends(require_token)]

    @app.post(
        "/api/v1/sim/xid",
        dependencies=sim_only,
        response_model=XidInjectedDocument,
        response_model_exclude_unset=True,
        responses=_errors(400, 404),
    )
    def sim_xid(body: XidInjection) -> dict[str, Any]:
        """Write a real-format NVRM Xid line into the simulated kernel log."""
        return require_sim().inject_xid(body.card, body.xid, body.message)

    @app.post(
        "/api/v1/sim/card/{index}",
        dependencies=sim_only,
        response_model=CardChangedDocument,
        response_model_exclude_unset=True,
        responses=_errors(400, 404),
    )
    def sim_card(index: int, body: dict[str, Any]) -> dict[str, Any]:
        """Change a simulated card's readings, e.g. ``{"lost": true}``."""
        return require_sim().set_card(index, body)

    @app.post(
        "/api/v1/sim/reboot",
        dependencies=sim_only,
        response_model=SimRebootDocument,
        response_model_exclude_unset=True,
        responses=_errors(404),
    )
    def sim_reboot() -> dict[str, Any]:
        """Simulate a host reboot (new boot id, caps back at default, fresh kernel log)."""
        return require_sim().reboot()

    return app
