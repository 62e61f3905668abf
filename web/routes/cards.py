"""The cards' passports: ``GET /api/v1/cards/{name}``, and the out-of-service mark.

The daemon hands ``create_app`` an object satisfying ``CardControl`` (web never imports
daemon). ``name`` is an index of the cards now, a serial, a UUID or a PCI address; an
unknown one is 404 naming the known cards. Marking a card out of service (or back in)
needs the token, like every mutation.
"""

from __future__ import annotations

from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Depends, Path
from pydantic import BaseModel, ConfigDict, Field

from serving.errors import Unavailable
from web.auth import TokenGuard
from web.errors import error_responses
from web.models import Document, Number


class CardControl(Protocol):
    """What the API asks of the daemon's passports."""

    def passport(self, name: str) -> dict[str, Any]:
        """Card ``name``'s passport (``NotFound`` naming the known cards)."""
        ...

    def mark(self, name: str, reason: str | None, actor: str) -> dict[str, Any]:
        """Take card ``name`` out of service (``reason``) or back in (None); its passport."""
        ...


class ServiceRequest(BaseModel):
    """``POST /api/v1/cards/{name}/service`` body."""

    model_config = ConfigDict(extra="forbid")
    out_of_service: Annotated[
        str | None,
        Field(
            max_length=200,
            description="why the card is out of service (RMA, reseat pending...); null: back in service",
        ),
    ]


class CardNowDocument(Document):
    """What NVML reads of the card now."""

    index: int
    pci_bus_id: str
    board_id: str | None = Field(description="vendor:device, e.g. 10de:20c2")
    vbios_version: str | None
    memory_total_mib: int | None
    unlock: str = Field(description="unlocked, unknown, or the vram_unlocked finding")
    power_limit_w: Number | None
    power_min_limit_w: Number | None
    power_default_limit_w: Number | None
    power_max_limit_w: Number | None
    pcie: str = Field(description="the link it trained at, e.g. Gen2 x4")
    pcie_max: str


class SlotDocument(Document):
    """One place the card has sat (its first sighting, then each move)."""

    since: str
    pci_bus_id: str
    index: int | None


class DiagRunDocument(Document):
    """One diagnostic run that tested the card."""

    ts: str
    kind: str = Field(description="memtest, pcie or compute")
    outcome: str | None
    verdict: str


class XidDocument(Document):
    """One Xid attributed to the card."""

    ts: str
    xid: int | None
    message: str


class CrashDocument(Document):
    """A crash bundle whose verdict named the card (``fleetctl crash show ID``)."""

    ts: str
    bundle_id: str | None
    crash_class: str | None
    verdict: str | None
    message: str


class BenchStepDocument(Document):
    """One cap of a sweep, with the card's own draw there."""

    cap_w: Number | None
    decode_tok_s_total: Number | None = Field(description="the rig's decode throughput")
    tok_per_w: Number | None = Field(description="the rig's tokens per joule (tok/s per W)")
    card_draw_w: Number | None = Field(description="this card's mean draw in the cell")


class CardBenchDocument(Document):
    """A bench run the card was in: its cap and the tok/W it gave (the rig's figures)."""

    run_id: int
    ts: str
    kind: str = Field(description="matrix or sweep")
    state: str
    build: str | None
    index: int = Field(description="the card's index during the run")
    cap_w: Number | None = Field(description="its cap (a sweep: the recommended cap)")
    decode_tok_s_total: Number | None
    tok_per_w: Number | None
    card_draw_w: Number | None
    steps: list[BenchStepDocument] = Field(description="a sweep's caps; empty for a matrix")
    recommended_cap_w: Number | None


class PassportDocument(Document):
    """``GET /api/v1/cards/{name}``: a card's passport."""

    uuid: str
    serial: str | None
    name: str
    pci_bus_id: str = Field(description="where it was last seen")
    index: int
    first_seen: str
    last_seen: str
    present: bool = Field(description="in this rig's last poll")
    first_time: bool = Field(description="seen for the first time: no history yet")
    now: CardNowDocument | None
    slots: list[SlotDocument]
    diags: list[DiagRunDocument]
    xids: list[XidDocument]
    crashes: list[CrashDocument] = Field(default_factory=list)
    bench: list[CardBenchDocument] = Field(
        default_factory=list, description="bench runs the card was in, newest first (10)"
    )
    out_of_service: dict[str, Any] | None = Field(description="{reason, since, actor, serial}")


CardName = Annotated[
    str,
    Path(min_length=1, max_length=80, description="an index, a serial, a UUID or a PCI address"),
]


def router(cards: CardControl | None, guard: TokenGuard) -> APIRouter:
    """The routes around ``cards`` (``None``: every route 503)."""
    routes = APIRouter()

    def control() -> CardControl:
        if cards is None:
            raise Unavailable("no card passports in this daemon", "no_cards")
        return cards

    @routes.get(
        "/api/v1/cards/{name}",
        response_model=PassportDocument,
        responses=error_responses(404, 503),
    )
    def passport(name: CardName) -> dict[str, Any]:
        """A card's passport: identity, what NVML reads now, slots, diagnostics, Xids."""
        return control().passport(name)

    @routes.post(
        "/api/v1/cards/{name}/service",
        dependencies=[Depends(guard)],
        response_model=PassportDocument,
        responses=error_responses(400, 404, 422, 503),
    )
    def service(name: CardName, body: ServiceRequest) -> dict[str, Any]:
        """Take a card out of service (shown, never paged nor gating a start) or back in."""
        return control().mark(name, body.out_of_service, "api")

    return routes
