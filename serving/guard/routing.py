"""Several engines behind one guard: a request goes to the engine that serves its ``model``.

fleetd names the engines in its sync (``engines``: each one's served model, URL, state,
profile, build and slots). With one engine (or none named) the guard passes everything to
``EngineHint.url`` as it always did, and the engine answers an unknown model itself. With
several, a request's ``model`` picks the engine that serves that name; a model no engine serves gets a 404 ``model_not_found`` in OpenAI's shape naming the ones
served; a request without a model, and every other path, goes to the first engine;
``GET /v1/models`` is answered by the guard with every engine's list, in fleetd's order.

The chosen engine rides in a context variable for the one request (each ASGI request runs
in its own task), so the code that builds the engine's URL, the pins and the stale-session
check read it without a parameter threaded through every call.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

MODELS = "/v1/models"


@dataclass(frozen=True, slots=True)
class EngineRoute:
    """One engine fleetd runs: what it serves, where, in which state, under which profile."""

    model: str
    url: str
    state: str | None = None
    profile: str | None = None
    build: str | None = None
    max_num_seqs: int | None = None

    def serves(self, model: str) -> bool:
        """True when ``model`` is this engine's served name."""
        return model == self.model


ROUTE: ContextVar[EngineRoute | None] = ContextVar("cmpfleet_guard_route", default=None)


def parse_routes(found: Any) -> tuple[EngineRoute, ...]:
    """fleetd's ``engines`` list (malformed entries dropped: the sync is fleetd's, but bounded)."""
    if not isinstance(found, list):
        return ()
    routes: list[EngineRoute] = []
    for item in found[:16]:
        if not isinstance(item, dict):
            continue
        model, url = item.get("model"), item.get("url")
        if not isinstance(model, str) or not model or not isinstance(url, str):
            continue
        if not url.startswith("http"):
            continue
        state, profile, build = item.get("state"), item.get("profile"), item.get("build")
        seqs = item.get("max_num_seqs")
        routes.append(
            EngineRoute(
                model,
                url.rstrip("/"),
                state if isinstance(state, str) else None,
                profile if isinstance(profile, str) else None,
                build if isinstance(build, str) else None,
                seqs if isinstance(seqs, int) and seqs > 0 else None,
            )
        )
    return tuple(routes)


def route_for(routes: tuple[EngineRoute, ...], model: Any) -> EngineRoute | None:
    """The engine for a request's ``model`` (no model: the first; unknown: None)."""
    if not routes:
        return None
    if not isinstance(model, str) or not model:
        return routes[0]
    for route in routes:
        if route.serves(model):
            return route
    return None


def merged_models(lists: Iterable[Any]) -> dict[str, Any]:
    """``/v1/models`` of several engines as one list (each model once, in engine order)."""
    data: list[Any] = []
    seen: set[str] = set()
    for answer in lists:
        rows = answer.get("data") if isinstance(answer, dict) else None
        for row in rows if isinstance(rows, list) else []:
            name = row.get("id") if isinstance(row, dict) else None
            if isinstance(name, str) and name not in seen:
                seen.add(name)
                data.append(row)
    return {"object": "list", "data": data}
