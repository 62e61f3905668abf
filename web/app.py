"""The FastAPI application: ``/healthz``, the ``/api/v1`` REST API and simulation control.

Reads come from the daemon's in-memory state (never a live NVML call in a request), so
a slow GPU cannot stall the API. Every POST needs ``Authorization: Bearer <token>`` (401
without, 403 with a wrong one), and so does the engine log (it can hold users' prompts:
not for every local user); on a non-loopback listener every endpoint but ``/healthz`` does.
Every route declares its response model (``web.models``), so ``/openapi.json`` documents
every body; request bodies are capped (``web.limits``).

``create_app`` only assembles: the middleware, the error handlers, and one router per
resource (``web.routes``), each given what it reads and the token guard once.
"""

from __future__ import annotations

from collections.abc import Collection

from fastapi import APIRouter, FastAPI
from fastapi_offline import FastAPIOffline
from prometheus_client.registry import CollectorRegistry

from web.auth import RemoteToken, TokenGuard
from web.errors import install_error_handlers
from web.hosts import LoopbackHosts
from web.limits import MAX_BODY_BYTES, BodyLimit
from web.openapi_doc import install_plain_openapi
from web.rendered import InvalidateOnMutation, RenderedDocuments, rendered_documents
from web.routes import alerts as alert_routes
from web.routes import bench as bench_routes
from web.routes import builds as builds_routes
from web.routes import (
    canaries,
    caps,
    checks,
    dashboard,
    events,
    health,
    history,
    logs,
    recovery,
    serving,
    sim,
    status,
)
from web.routes import cards as cards_routes
from web.routes import crashes as crash_routes
from web.routes import diag as diag_routes
from web.routes import drain as drain_routes
from web.routes import guard as guard_routes
from web.routes import metrics as metrics_routes
from web.routes.alerts import AlertControl
from web.routes.bench import BenchControl
from web.routes.builds import BuildsControl
from web.routes.canaries import CanaryControl
from web.routes.cards import CardControl
from web.routes.crashes import CrashArchive
from web.routes.diag import DiagControl
from web.routes.drain import DrainControl
from web.routes.guard import GuardControl
from web.services import WebServices
from web.status_views import StatusViews
from web.streams import StreamGate
from web.version import __version__

DOCS_ASSETS_URL = "/docs-assets"


def create_app(
    services: WebServices,
    max_body_bytes: int = MAX_BODY_BYTES,
    *,
    metrics: CollectorRegistry | None = None,
    alerts: AlertControl | None = None,
    canary: CanaryControl | None = None,
    allowed_hosts: Collection[str] | None = None,
    diag: DiagControl | None = None,
    traffic: GuardControl | None = None,
    builds: BuildsControl | None = None,
    cards: CardControl | None = None,
    crashes: CrashArchive | None = None,
    bench: BenchControl | None = None,
    drain: DrainControl | None = None,
) -> FastAPI:
    """Build the app around ``services`` (no globals: everything hangs off the app).

    ``metrics``: the registry ``/metrics`` renders, its wings' collectors registered by
    the daemon (which always passes it; a test of other routes may leave it out). ``alerts``: the daemon's alerting (``/api/v1/alerts``), absent in
    stand-ins without it. ``canary`` serves the canary routes (409 without one: no engine).
    ``allowed_hosts`` (a loopback listener's): besides loopback names, the ``Host`` names
    served; any other is refused (``web.hosts``: DNS rebinding). ``None``: no such check.
    ``diag``: the daemon's diagnostics (the memory test); absent in stand-ins without it.
    ``traffic``: the traffic guard (``/api/v1/guard``), when ``[guard]`` is configured.
    ``builds``: the engine builds seen (``/api/v1/builds``; 409 without one: no engine).
    ``cards``: the cards' passports (``/api/v1/cards``); absent in stand-ins without them.
    ``bench``: the bench and the report (``/api/v1/bench``, ``/api/v1/report``; 409 without).
    ``drain``: the rig's drain (``/api/v1/drain``, ``/api/v1/undrain``; 409 without one).
    """
    app = _offline_app()
    documents = rendered_documents(app)
    views = StatusViews(documents, services)  # before the middleware: it renders the status
    _add_middleware(app, services, documents, max_body_bytes, allowed_hosts)
    install_error_handlers(app)
    install_plain_openapi(app)
    guard = TokenGuard(lambda: services.token)
    gate = app.state.stream_gate = StreamGate()  # web.streams.close_streams ends them
    routers = [
        health.router(),
        status.router(views, gate),
        events.router(services, guard),
        caps.router(services, guard),
        serving.router(services, guard),
        logs.router(services, gate, guard),
        recovery.router(services, guard),
        history.router(services),
        checks.router(),
        canaries.router(canary, guard),
        diag_routes.router(diag, guard),
        sim.router(services, guard),
        dashboard.router(),
        guard_routes.router(traffic),
        builds_routes.router(builds, guard),
        cards_routes.router(cards, guard),
        crash_routes.router(crashes),
        bench_routes.router(bench, guard),
        drain_routes.router(drain, guard),
    ]
    if alerts is not None:
        routers.append(alert_routes.router(alerts, guard))
    if metrics is not None:
        routers.append(metrics_routes.router(metrics, documents))
    for router in routers:
        _add_routes(app, router)
    return app


def _offline_app() -> FastAPI:
    """The app, with Swagger UI and ReDoc from fastapi-offline's packaged assets.

    Rigs are often offline, so ``/docs`` must not load from a CDN (and the validator badge
    would call out: off).
    """
    return FastAPIOffline(
        title="cmpfleet",
        version=__version__,
        description="Rig supervisor for NVIDIA CMP 170HX inference rigs.",
        static_url=DOCS_ASSETS_URL,
        swagger_ui_parameters={"validatorUrl": None},
    )


def _add_middleware(
    app: FastAPI,
    services: WebServices,
    documents: RenderedDocuments,
    max_body_bytes: int,
    allowed_hosts: Collection[str] | None,
) -> None:
    """Innermost first: re-render after a write, the remote token, the body cap, the hosts."""
    app.add_middleware(InvalidateOnMutation, invalidate=documents.invalidate)
    app.add_middleware(RemoteToken, token=None if services.loopback_only else services.token)
    # Added late, so outer: a body over the cap is refused before anything reads it.
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    if allowed_hosts is not None:  # outermost: a rebound name is refused before anything runs
        app.add_middleware(LoopbackHosts, allowed=allowed_hosts)


def _add_routes(app: FastAPI, router: APIRouter) -> None:
    """``router``'s routes on the app itself, in order.

    Not ``include_router``: this FastAPI keeps an included router behind one entry of
    ``app.routes``, where tests and tools list the routes. The router's own dependencies
    (the token guard) are already part of each of its routes.
    """
    app.router.routes.extend(router.routes)
