"""The FastAPI application: ``/healthz``, the ``/api/v1`` REST API and simulation control.

Reads come from the daemon's in-memory state (never a live NVML call in a request), so
a slow GPU cannot stall the API. Every POST needs ``Authorization: Bearer <token>`` (401
without, 403 with a wrong one), and so does the engine log (it can hold users' prompts:
not for every local user); on a non-loopback listener every endpoint but ``/healthz`` does.
Every route declares its response model (``web.models``), so ``/openapi.json`` documents
every body; request bodies are capped (``web.limits``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, HTTPException, Query, Request, Security
from fastapi.responses import Response
from fastapi.security import HTTPAuthorizationCredentials
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel, ConfigDict, Field

from hwcheck.model import EventKind, Severity
from web.alerts_api import AlertControl, alerts_router
from web.auth import RemoteToken, request_token, token_matches
from web.builds import BuildsControl, builds_router
from web.canary import CanaryControl, canary_router
from web.dashboard_routes import install_dashboard
from web.diag import DiagControl, diag_router
from web.errors import error_responses, install_error_handlers
from web.history import history_router
from web.hosts import LoopbackHosts
from web.limits import MAX_BODY_BYTES, BodyLimit
from web.logs import install_log_routes
from web.metrics import install_metrics
from web.metrics_model import MetricsSource
from web.models import (
    AckDocument,
    CapsDocument,
    CardChangedDocument,
    ClearLatchDocument,
    ClearLatchRequest,
    EventDocument,
    HealthDocument,
    RebootDocument,
    RebootRequest,
    RecipeDocument,
    ServingActionDocument,
    SimRebootDocument,
    StatusDocument,
    XidInjectedDocument,
)
from web.openapi_doc import BEARER, install_plain_openapi
from web.params import BeforeId, CardFilter, RowId, SinceTime, UntilTime
from web.profiles import ServingActionRequest, install_profile_routes
from web.rendered import InvalidateOnMutation, rendered_documents
from web.services import EventQuery, SimulationControl, WebServices
from web.status_views import StatusViews
from web.streams import StreamGate, install_status_stream
from web.version import __version__


class XidInjection(BaseModel):
    """``POST /api/v1/sim/xid`` body."""

    model_config = ConfigDict(extra="forbid")
    card: Annotated[int, Field(ge=0)]
    xid: Annotated[int, Field(ge=1, le=100000)]
    message: str | None = None


DOCS_ASSETS_URL = "/docs-assets"


def create_app(
    services: WebServices,
    max_body_bytes: int = MAX_BODY_BYTES,
    *,
    metrics: MetricsSource | None = None,
    alerts: AlertControl | None = None,
    canary: CanaryControl | None = None,
    allowed_hosts: Collection[str] | None = None,
    diag: DiagControl | None = None,
    builds: BuildsControl | None = None,
) -> FastAPI:
    """Build the app around ``services`` (no globals: everything hangs off this closure).

    ``metrics`` serves ``/metrics`` (the daemon always passes it; a test of other routes
    may leave it out). ``alerts``: the daemon's alerting (``/api/v1/alerts``), absent in
    stand-ins without it. ``canary`` serves the canary routes (409 without one: no engine).
    ``allowed_hosts`` (a loopback listener's): besides loopback names, the ``Host`` names
    served; any other is refused (``web.hosts``: DNS rebinding). ``None``: no such check.
    ``diag``: the daemon's diagnostics (the memory test); absent in stand-ins without it.
    ``builds``: the engine builds seen (``/api/v1/builds``; 409 without one: no engine).
    """
    # Swagger UI and ReDoc from fastapi-offline's packaged assets: rigs are often offline,
    # so /docs must not load from a CDN (and the validator badge would call out: off).
    app = FastAPIOffline(
        title="cmpfleet",
        version=__version__,
        description="Rig supervisor for NVIDIA CMP 170HX inference rigs.",
        static_url=DOCS_ASSETS_URL,
        swagger_ui_parameters={"validatorUrl": None},
    )

    def check_token(request: Request) -> None:
        given = request_token(request)
        if given is None:
            raise HTTPException(401, "missing bearer token", headers={"WWW-Authenticate": "Bearer"})
        if not token_matches(services.token, given):
            raise HTTPException(403, "wrong token")

    def require_token(
        request: Request,
        _declared: Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)] = None,
    ) -> None:
        check_token(request)  # reads the header itself: Basic too (see web.auth)

    def require_sim() -> SimulationControl:
        sim = services.sim
        if sim is None:
            raise HTTPException(404, "not simulating: start fleetd with --simulate")
        return sim

    documents = rendered_documents(app)
    status_views = StatusViews(documents, services)
    app.add_middleware(InvalidateOnMutation, invalidate=documents.invalidate)
    app.add_middleware(RemoteToken, token=None if services.loopback_only else services.token)

    # Added last, so outermost: a body over the cap is refused before anything reads it.
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    if allowed_hosts is not None:  # outermost: a rebound name is refused before anything runs
        app.add_middleware(LoopbackHosts, allowed=allowed_hosts)
    install_error_handlers(app)
    install_plain_openapi(app)
    if metrics is not None:
        install_metrics(app, metrics)
    # Routes are added to the app itself, not through include_router: FastAPI keeps an
    # included router's routes out of app.routes, where tests and tools list them.
    gate = app.state.stream_gate = StreamGate()  # web.streams.close_streams ends them
    install_status_stream(app, status_views.for_request, gate)
    install_log_routes(app, services, gate, require_token)

    install_dashboard(app)
    app.include_router(history_router(services))

    @app.get("/healthz", response_model=HealthDocument)
    def healthz() -> dict[str, str]:
        """200 once the daemon runs, with cmpfleet's version."""
        return {"status": "ok", "version": __version__}

    # HEAD for load balancers and uptime checkers that never read a body.
    app.add_api_route(
        "/healthz",
        healthz,
        methods=["HEAD"],
        response_model=HealthDocument,
        operation_id="healthz_head",
        summary="Healthz (HEAD)",
    )

    @app.get("/api/v1/status", response_model=StatusDocument, response_model_exclude_unset=True)
    async def status(request: Request) -> Response:
        """The rig overview (same document as ``fleetctl status --json``).

        Rendered at most a few times a second and shared by every reader (``web.rendered``);
        never older than 0.2 s, and never from before the last poll or API change.
        ``serving.last_log_line`` (engine output) only with the token (``web.status_views``).
        """
        document = status_views.for_request(request)
        return Response(await document.get(), media_type="application/json")

    @app.get(
        "/api/v1/events",
        response_model=list[EventDocument],
        response_model_exclude_unset=True,
        responses=error_responses(400, 404),
    )
    def events(
        request: Request,
        response: Response,
        since: SinceTime = None,
        until: UntilTime = None,
        kind: EventKind | None = None,
        card: CardFilter = None,
        acked: Annotated[bool | None, Query(description="only (un)acknowledged ones")] = None,
        before_id: BeforeId = None,
        limit: Annotated[int, Query(ge=1, le=10000)] = 100,
        min_severity: Annotated[
            Severity | None, Query(description="this severity or worse (info: every event)")
        ] = None,
    ) -> Sequence[EventDocument]:
        """Events, newest first; a full page links the next one (``Link: rel="next"``).

        Times without an offset are UTC. Pages are keyset pages: new events arriving while
        a client pages back never shift or repeat what it sees.
        """
        query = EventQuery(
            since,
            until,
            None if kind is None else kind.value,
            card,
            acked,
            before_id,
            limit,
            None if min_severity is None else min_severity.value,
        )
        page = services.list_events(query)
        if len(page) == limit:
            following = request.url.include_query_params(before_id=page[-1].id)
            response.headers["Link"] = f'<{following.path}?{following.query}>; rel="next"'
        return page

    @app.post(
        "/api/v1/events/{event_id}/ack",
        dependencies=[Depends(require_token)],
        response_model=AckDocument,
        response_model_exclude_unset=True,
        responses=error_responses(404),
    )
    def ack(event_id: RowId) -> dict[str, Any]:
        """Acknowledge one event."""
        return services.ack_event(event_id, "api")

    @app.post(
        "/api/v1/caps/apply",
        dependencies=[Depends(require_token)],
        response_model=CapsDocument,
        response_model_exclude_unset=True,
        responses=error_responses(503),
    )
    def caps_apply() -> dict[str, Any]:
        """Re-apply the configured power cap (caps reset at every boot)."""
        return services.apply_caps()

    # Before the templated /serving/{action}: "switch" is not one of its actions.
    install_profile_routes(app, services, require_token)

    @app.post(
        "/api/v1/serving/{action}",
        dependencies=[Depends(require_token)],
        response_model=ServingActionDocument,
        response_model_exclude_unset=True,
        responses=error_responses(409, 503),
    )
    def serving(
        action: Literal["start", "stop", "restart"], body: ServingActionRequest | None = None
    ) -> dict[str, Any]:
        """Start, stop or restart the engine (409 with the reason and its code when refused).

        ``{"stop_foreign": true}`` with ``start``: first stop foreign containers that hold
        the port or the profile's cards (``docker|podman stop``; recorded).
        """
        if body is not None and body.stop_foreign:
            return services.serving_action(action, stop_foreign=True)
        return services.serving_action(action)

    @app.get(
        "/api/v1/serving/recipe",
        response_model=RecipeDocument,
        response_model_exclude_unset=True,
        responses=error_responses(409),
    )
    def serving_recipe() -> RecipeDocument:
        """The argv and environment the daemon would launch; diff to the last ready launch."""
        return services.serving_recipe()

    @app.get(
        "/api/v1/recovery/reboot",
        response_model=RebootDocument,
        response_model_exclude_unset=True,
    )
    def recovery_reboot_plan(cold: bool = False) -> dict[str, Any]:
        """What a confirmed reboot would do now (changes nothing, so no token on loopback).

        What ``fleetctl reboot [--cold]`` without ``--confirm`` shows (``cold``: a power cycle).
        """
        return services.recovery_reboot(False, cold)

    @app.post(
        "/api/v1/recovery/reboot",
        dependencies=[Depends(require_token)],
        response_model=RebootDocument,
        response_model_exclude_unset=True,
        responses=error_responses(409),
    )
    def recovery_reboot(body: RebootRequest) -> dict[str, Any]:
        """Explain the reboot; with ``confirm``, stop the engine cleanly, then reboot.

        409 when the engine would not stop (then nothing is rebooted).
        """
        return services.recovery_reboot(body.confirm, body.cold)

    @app.post(
        "/api/v1/recovery/clear",
        dependencies=[Depends(require_token)],
        response_model=ClearLatchDocument,
        response_model_exclude_unset=True,
        responses=error_responses(400),
    )
    def recovery_clear(body: ClearLatchRequest) -> dict[str, Any]:
        """Clear the reboot-required latch (the recorded operator override)."""
        return services.recovery_clear(body.reason)

    app.include_router(canary_router(canary, require_token))
    app.include_router(builds_router(builds, require_token))
    app.include_router(diag_router(diag, require_token))
    if alerts is not None:
        app.include_router(alerts_router(alerts, require_token))

    sim_only = [Depends(require_sim), Depends(require_token)]

    @app.post(
        "/api/v1/sim/xid",
        dependencies=sim_only,
        response_model=XidInjectedDocument,
        response_model_exclude_unset=True,
        responses=error_responses(400, 404),
    )
    def sim_xid(body: XidInjection) -> dict[str, Any]:
        """Write a real-format NVRM Xid line into the simulated kernel log."""
        return require_sim().inject_xid(body.card, body.xid, body.message)

    @app.post(
        "/api/v1/sim/card/{index}",
        dependencies=sim_only,
        response_model=CardChangedDocument,
        response_model_exclude_unset=True,
        responses=error_responses(400, 404),
    )
    def sim_card(index: int, body: dict[str, Any]) -> dict[str, Any]:
        """Change a simulated card's readings, e.g. ``{"lost": true}``."""
        return require_sim().set_card(index, body)

    @app.post(
        "/api/v1/sim/reboot",
        dependencies=sim_only,
        response_model=SimRebootDocument,
        response_model_exclude_unset=True,
        responses=error_responses(404),
    )
    def sim_reboot() -> dict[str, Any]:
        """Simulate a host reboot (new boot id, caps back at default, fresh kernel log)."""
        return require_sim().reboot()

    return app
