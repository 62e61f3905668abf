"""One router per resource (``web.routes``), assembled by ``create_app``: every route comes
from one, every write is guarded, and the routes are the app's own (listed in ``app.routes``).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
from fastapi.routing import APIRoute

from tests.support.recorded_services import RecordedServices
from web.app import create_app

PATH_VALUES = {
    "event_id": "1",
    "action": "start",
    "index": "0",
    "alert_id": "1",
    "name": "0",
    "run_id": "1",
}


class Anything:
    """A control object for the optional routers (alerts, canaries, diag, metrics)."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"{name} was called: the guard should have refused first")


def full_app() -> Any:
    return create_app(
        RecordedServices(),
        metrics=Anything(),  # type: ignore[arg-type]
        alerts=Anything(),  # type: ignore[arg-type]
        canary=Anything(),  # type: ignore[arg-type]
        diag=Anything(),  # type: ignore[arg-type]
        bench=Anything(),  # type: ignore[arg-type]
    )


def api_routes(app: Any) -> list[APIRoute]:
    return [r for r in app.routes if isinstance(r, APIRoute) and r.path.startswith("/api/v1")]


def test_every_api_route_comes_from_a_resource_router() -> None:
    routes = api_routes(full_app())
    assert len(routes) > 25  # every resource's routes are the app's own, not hidden behind one
    modules = {r.endpoint.__module__ for r in routes}
    assert all(m.startswith("web.routes.") for m in modules), modules
    assert len({(r.path, *sorted(r.methods)) for r in routes}) == len(routes), "no route twice"


def test_every_api_write_needs_the_token() -> None:
    app = full_app()
    writes = [r for r in api_routes(app) if r.methods & {"POST", "PUT", "PATCH", "DELETE"}]
    assert len(writes) >= 10

    async def refused() -> dict[str, int]:
        transport = httpx.ASGITransport(app=app)
        answers: dict[str, int] = {}
        async with httpx.AsyncClient(transport=transport, base_url="http://rig") as client:
            for route in writes:
                path = re.sub(r"\{(\w+)\}", lambda m: PATH_VALUES[m.group(1)], route.path)
                answers[route.path] = (await client.post(path, json={})).status_code
        return answers

    answers = asyncio.run(refused())
    assert answers == dict.fromkeys(answers, 401), answers
