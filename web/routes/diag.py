"""The diagnostics routes: ``POST /api/v1/diag/memtest`` runs the memory test, ``GET`` shows it.

The daemon hands ``create_app`` an object satisfying ``DiagControl`` (web never imports
daemon). A run answers when it is done (minutes: fleetctl waits with a progress line), with
each card's result and fleetctl's exit code; a run while the engine runs is refused with
409 ``engine_running`` (fleetctl exit 4), one while another runs with 429.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Protocol

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from serving.errors import Unavailable
from web.auth import TokenGuard
from web.errors import error_responses
from web.models import Document, IsoTime, Number

MAX_GIB = 256.0


class DiagControl(Protocol):
    """What the API asks of the daemon's diagnostics."""

    def memtest(self, card: int | None, gib: float, actor: str) -> dict[str, Any]:
        """Run the memory test now (refusals are ``serving.errors``)."""
        ...

    def memtest_document(self) -> dict[str, Any]:
        """Whether a test runs, and each card's last verdict."""
        ...


class MemtestRequest(BaseModel):
    """``POST /api/v1/diag/memtest`` body: one card (default every card) and GiB per card."""

    model_config = ConfigDict(extra="forbid")
    card: Annotated[int, Field(ge=0, le=63)] | None = None
    gib: Annotated[float, Field(gt=0, le=MAX_GIB)] = 8.0


class MemtestCardDocument(Document):
    """One card's result: ``passed``, ``failed`` (bits flipped), ``timed_out`` and so on."""

    card: int
    pci_bus_id: str
    outcome: Literal["passed", "failed", "timed_out", "error", "unavailable", "not_run"]
    tested_mib: int
    bit_errors: int
    first_error_offset: int | None = Field(description="byte offset of the first bad word")
    pattern: str | None = Field(description="the pattern that found the first error")
    error: str | None = Field(description="CUDA's error name, or why the card was not tested")
    duration_s: Number
    ts: IsoTime | None = None


class MemtestRunDocument(Document):
    """``POST /api/v1/diag/memtest``: this run's results and fleetctl's exit code."""

    gib: Number
    cards: list[MemtestCardDocument]
    exit_code: int = Field(description="0 clean, 2 errors found, 1 a card could not be tested")
    message: str


class MemtestOverviewDocument(Document):
    """``GET /api/v1/diag/memtest``: a run in progress, and each card's last verdict."""

    running: bool
    cards: list[MemtestCardDocument]


def router(diag: DiagControl | None, guard: TokenGuard) -> APIRouter:
    """The routes around ``diag`` (``None``: a stand-in without diagnostics, every route 503)."""
    routes = APIRouter()
    token = [Depends(guard)]

    def control() -> DiagControl:
        if diag is None:
            raise Unavailable("no diagnostics in this daemon", "no_diag")
        return diag

    @routes.post(
        "/api/v1/diag/memtest",
        dependencies=token,
        response_model=MemtestRunDocument,
        response_model_exclude_unset=True,
        responses=error_responses(404, 409, 429, 503),
    )
    def memtest_run(body: MemtestRequest | None = None) -> dict[str, Any]:
        """Pattern-test each card's memory (the engine must be stopped); answers when done."""
        request = body or MemtestRequest()
        return control().memtest(request.card, request.gib, "api")

    @routes.get(
        "/api/v1/diag/memtest",
        response_model=MemtestOverviewDocument,
        response_model_exclude_unset=True,
        responses=error_responses(503),
    )
    def memtest_overview() -> dict[str, Any]:
        """Whether a memory test runs now, and each card's last verdict."""
        return control().memtest_document()

    return routes
