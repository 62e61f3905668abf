"""``GET /api/v1/history``: the dashboard's charts, typed for ``/openapi.json``.

The daemon lays every series on one time grid (``ts_s``, epoch seconds of each bucket's
start) with ``null`` for a gap, so a chart library draws the lists as they come.
"""

from __future__ import annotations

import threading
from typing import Any, Literal

from fastapi import APIRouter, Response
from pydantic import Field

from web.models import Document, ErrorDocument, IsoTime, Number
from web.services import WebServices

Series = list[Number | None]


class CardHistoryDocument(Document):
    """One card's series on the grid."""

    card: int
    uuid: str
    power_draw_w: Series
    temperature_c: Series
    sm_clock_mhz: Series


class EngineHistoryDocument(Document):
    """The engine's series on the grid."""

    tokens_per_s: Series
    ttft_p95_s: Series | None = None
    spec_acceptance_ratio: Series | None = None
    prefix_cache_hit_ratio: Series | None = None


class ChartMarkerDocument(Document):
    """A moment the charts mark on their time axis."""

    ts_s: Number = Field(description="when, epoch seconds")
    kind: Literal["xid", "latch", "reboot"]
    label: str = Field(description="the marker's short text, e.g. 'Xid 31'")
    title: str = Field(description="what happened, in a line")
    card: int | None = None


class HistoryDocument(Document):
    """``GET /api/v1/history``."""

    span: Literal["1h", "24h"]
    since: IsoTime
    until: IsoTime
    step_s: int = Field(description="width of one bucket; each value is the bucket's mean")
    resolution: str = Field(description="what the buckets were made of: raw samples or 1m rollups")
    ts_s: list[int] = Field(description="bucket starts, epoch seconds, oldest first")
    cards: list[CardHistoryDocument]
    engine: EngineHistoryDocument
    markers: list[ChartMarkerDocument] = Field(
        default_factory=list, description="Xids, latches and reboots in the window, oldest first"
    )


class _Rendered:
    """The JSON of the last document of each span, while the daemon hands the same one.

    The daemon keeps a history document for its chart window (``daemon.rig.history_cache``);
    validating and encoding its ~36,000 numbers again cost ~20 ms a request, most of what
    the cache saved. Checked by identity: a new document is rendered once.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[str, tuple[dict[str, Any], bytes]] = {}

    def json(self, span: str, document: dict[str, Any]) -> bytes:
        with self._lock:
            kept = self._last.get(span)
            if kept is not None and kept[0] is document:
                return kept[1]
        body = HistoryDocument.model_validate(document).model_dump_json(by_alias=True).encode()
        with self._lock:
            self._last[span] = (document, body)
        return body


def router(services: WebServices) -> APIRouter:
    """The history route, reading through ``services``."""
    routes = APIRouter()
    rendered = _Rendered()

    @routes.get(
        "/api/v1/history",
        response_model=HistoryDocument,
        responses={503: {"model": ErrorDocument}},
    )
    def history(span: Literal["1h", "24h"] = "1h") -> Response:
        """Power, temperature and SM clock per card, and tokens/s, over the last 1 h or 24 h.

        With the Xids, latches and reboots of that window as markers for the time axis.
        """
        body = rendered.json(span, services.history(span))
        return Response(body, media_type="application/json")

    return routes
