"""``GET /api/v1/checks``: every check fleetd runs, as its spec declares it (read-only).

The dashboard asks this instead of keeping its own lists (the Host panel's checks, which
check each tile's reading shows); the answer is the registry's specs
(``hwcheck.checks.spec``), in report order.
"""

from __future__ import annotations

from fastapi import APIRouter

from hwcheck.checks import CHECKS
from web.models import Document


class CheckInfoDocument(Document):
    """One check: its id, short name, alert, tag and where it counts."""

    id: str
    title: str
    alert: str | None  # its alertname; None: it alerts through its own events (Xids)
    tag: str  # the short word a card row shows when it fails
    gate_default: bool  # a critical result refuses a start by default
    host_panel: bool  # drawn in the dashboard's Host panel
    drawn_at: str | None  # the dashboard's place showing its severity (DrawnAt); None: none


class ChecksDocument(Document):
    """Every check, in the order a report lists them."""

    checks: list[CheckInfoDocument]


def checks_document() -> ChecksDocument:
    """The registry's specs as the API gives them."""
    return ChecksDocument(
        checks=[
            CheckInfoDocument(
                id=spec.id,
                title=spec.title,
                alert=None if spec.alert is None else spec.alert.name,
                tag=spec.tag or spec.id.upper(),
                gate_default=spec.gate,
                host_panel=spec.host_panel,
                drawn_at=None if spec.drawn_at is None else spec.drawn_at.value,
            )
            for spec in CHECKS
        ]
    )


def router() -> APIRouter:
    """``/api/v1/checks``: the same for every rig of this build."""
    routes = APIRouter()
    document = checks_document()

    @routes.get("/api/v1/checks", response_model=ChecksDocument)
    def checks() -> ChecksDocument:
        """Every check fleetd runs: id, title, alert name, tag, gate default, where drawn."""
        return document

    return routes
