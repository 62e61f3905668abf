"""``/api/v1/alerts``: recent alerts with their delivery state, and a test alert.

The daemon implements ``AlertControl`` (web never imports daemon) and hands it to
``create_app``; without one (a stand-in without alerting) these routes are not mounted.
Reading alerts needs no token on a loopback listener (like events); sending a test alert
is a POST and so needs it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Protocol

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, ConfigDict, Field

from web.auth import TokenGuard
from web.models import Document, ErrorDocument, IsoTime
from web.params import RowId


class AlertControl(Protocol):
    """What the alert routes need from the daemon."""

    def list_alerts(self, limit: int, status: str | None) -> dict[str, Any]:
        """``{sinks: [...], alerts: [...]}``, alerts newest first with their deliveries."""
        ...

    def get_alert(self, alert_id: int) -> dict[str, Any]:
        """One alert with its deliveries; ``NotFound`` when there is none."""
        ...

    def send_test(self, sink: str | None) -> dict[str, Any]:
        """Queue a test alert (``NotFound``: no such sink; ``Conflict``: no sinks)."""
        ...


class TestAlertRequest(BaseModel):
    """``POST /api/v1/alerts/test`` body."""

    model_config = ConfigDict(extra="forbid")
    sink: Annotated[str, Field(min_length=1, max_length=64)] | None = None


class DeliveryDocument(Document):
    """One notification of an alert to one sink."""

    id: str = Field(description="the notification's id (receivers de-duplicate on it)")
    sink: str
    status: Literal["firing", "resolved"]
    repeat: bool
    state: Literal["pending", "retrying", "delivered", "gave_up"]
    attempts: int
    last_error: str | None
    created_at: IsoTime
    delivered_at: IsoTime | None


class AlertDocument(Document):
    """One alert: a fingerprint that fired (duplicates folded into ``count``) and resolved."""

    id: int
    fingerprint: str
    rule: str
    severity: Literal["info", "warning", "critical"]
    status: Literal["firing", "resolved"]
    summary: str
    advice: str
    labels: dict[str, Any]
    count: int
    started_at: IsoTime
    resolved_at: IsoTime | None
    deliveries: list[DeliveryDocument]


class SinkDocument(Document):
    """A configured webhook (its URL without path or credentials)."""

    name: str
    format: str
    url: str
    min_severity: str
    signed: bool
    pending: int


class AlertsDocument(Document):
    """``GET /api/v1/alerts``."""

    sinks: list[SinkDocument]
    alerts: list[AlertDocument]


def router(alerts: AlertControl, guard: TokenGuard) -> APIRouter:
    """The alert routes around ``alerts`` (the POST guarded by the token)."""
    routes = APIRouter()
    token = [Depends(guard)]
    not_found: dict[int | str, dict[str, Any]] = {404: {"model": ErrorDocument}}

    @routes.get("/api/v1/alerts", response_model=AlertsDocument, response_model_exclude_unset=True)
    def list_alerts(
        limit: Annotated[int, Query(ge=1, le=1000)] = 50,
        status: Literal["firing", "resolved"] | None = None,
    ) -> dict[str, Any]:
        """Recent alerts, newest first, with their delivery state per sink."""
        return alerts.list_alerts(limit, status)

    @routes.get(
        "/api/v1/alerts/{alert_id}",
        response_model=AlertDocument,
        response_model_exclude_unset=True,
        responses=not_found,
    )
    def get_alert(alert_id: RowId) -> dict[str, Any]:
        """One alert and its deliveries."""
        return alerts.get_alert(alert_id)

    @routes.post(
        "/api/v1/alerts/test",
        dependencies=token,
        response_model=AlertDocument,
        response_model_exclude_unset=True,
        responses={404: {"model": ErrorDocument}, 409: {"model": ErrorDocument}},
    )
    def send_test(body: TestAlertRequest | None = None) -> dict[str, Any]:
        """Queue a test alert for one sink (``sink``) or all of them."""
        return alerts.send_test(None if body is None else body.sink)

    return routes
