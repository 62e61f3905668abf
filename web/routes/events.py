"""``GET /api/v1/events`` (keyset pages, newest first) and ``POST /api/v1/events/{id}/ack``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from hwcheck.model import EventKind, Severity
from web.auth import TokenGuard
from web.errors import error_responses
from web.models import AckDocument, EventDocument
from web.params import BeforeId, CardFilter, RowId, SinceTime, UntilTime
from web.services import EventQuery, WebServices


def router(services: WebServices, guard: TokenGuard) -> APIRouter:
    """The event routes, through ``services`` (acknowledging: the token)."""
    routes = APIRouter()

    @routes.get(
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

    @routes.post(
        "/api/v1/events/{event_id}/ack",
        dependencies=[Depends(guard)],
        response_model=AckDocument,
        response_model_exclude_unset=True,
        responses=error_responses(404),
    )
    def ack(event_id: RowId) -> dict[str, Any]:
        """Acknowledge one event."""
        return services.ack_event(event_id, "api")

    return routes
