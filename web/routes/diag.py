"""The diagnostics routes: ``POST /api/v1/diag/memtest`` runs the memory test, ``GET`` shows it.

The daemon hands ``create_app`` an object satisfying ``DiagControl`` (web never imports
daemon). A run answers when it is done (fleetctl waits, showing each card's progress from
``GET``), with each card's result and fleetctl's exit code; a run while the engine runs
is refused with 409 ``engine_running`` (fleetctl exit 4), one while another runs with
429, an unknown pattern with 422 naming the known ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal, Protocol

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hwcheck.carddiag.model import DiagKind
from hwcheck.memtest.patterns import PATTERNS, UnknownPattern, parse_patterns
from hwcheck.memtest.results import MemtestPlan
from serving.errors import Unavailable
from web.auth import TokenGuard
from web.errors import error_responses
from web.models import Document, IsoTime, Number

MAX_GIB = 256.0
MAX_PASSES = 100
MAX_MINUTES = 24 * 60.0
MIB_PER_GIB = 1024


class DiagControl(Protocol):
    """What the API asks of the daemon's diagnostics."""

    def memtest(
        self,
        card: int | Sequence[int] | None,
        plan: MemtestPlan,
        actor: str,
        seed: int | None = None,
    ) -> dict[str, Any]:
        """Run the memory test now (refusals are ``serving.errors``)."""
        ...

    def memtest_document(self) -> dict[str, Any]:
        """Whether a test runs, and each card's last verdict."""
        ...

    def card_diag(
        self, kind: DiagKind, card: int | None, actor: str, seconds: float = 0.0
    ) -> dict[str, Any]:
        """Run ``diag pcie`` or ``diag compute`` now (refusals are ``serving.errors``)."""
        ...


class MemtestRequest(BaseModel):
    """``POST /api/v1/diag/memtest`` body: what fleetctl diag memtest's flags say."""

    model_config = ConfigDict(extra="forbid")
    card: Annotated[
        int | None, Field(ge=0, le=63, description="one card (NVML index); default every card")
    ] = None
    cards: Annotated[
        list[Annotated[int, Field(ge=0, le=63)]] | None,
        Field(
            min_length=1,
            max_length=64,
            description="several cards (NVML indexes), instead of card; default every card",
        ),
    ] = None
    gib: Annotated[
        float | None,
        Field(gt=0, le=MAX_GIB, description="GiB per card; default all free memory less a reserve"),
    ] = None
    patterns: Annotated[
        list[str] | None,
        Field(max_length=len(PATTERNS) * 2, description=f"default all: {', '.join(PATTERNS)}"),
    ] = None
    passes: Annotated[int, Field(ge=1, le=MAX_PASSES)] = 1
    minutes: Annotated[
        float, Field(ge=0, le=MAX_MINUTES, description="the step (stress) mode after the patterns")
    ] = 0.0
    inject: Annotated[
        bool, Field(description="plant one known fault per pattern pass and require it found")
    ] = False
    seed: Annotated[
        int | None,
        Field(ge=0, le=0xFFFFFFFF, description="the random data's seed; default a fresh one"),
    ] = None

    @field_validator("patterns")
    @classmethod
    def _known_patterns(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        try:
            return list(parse_patterns(",".join(value)))
        except UnknownPattern as exc:
            raise ValueError(str(exc)) from None

    @model_validator(mode="after")
    def _one_way_to_name_cards(self) -> MemtestRequest:
        if self.card is not None and self.cards is not None:
            raise ValueError("give card or cards, not both")
        return self

    def chosen(self) -> int | list[int] | None:
        """The card(s) asked for (None: every card)."""
        return self.cards if self.cards is not None else self.card

    def plan(self) -> MemtestPlan:
        """The plan each card runs."""
        return MemtestPlan(
            mib=None if self.gib is None else max(int(self.gib * MIB_PER_GIB), 1),
            patterns=PATTERNS if self.patterns is None else tuple(self.patterns),
            passes=self.passes,
            stress_s=self.minutes * 60,
            inject=self.inject,
        )


class BadWordDocument(Document):
    """One bad word: its byte offset in the tested memory, what was expected and read."""

    offset: int
    expected: int
    got: int


class PatternRunDocument(Document):
    """One pattern's pass on one card (``stress``: the step mode, ``cycles`` its bursts)."""

    pattern: str
    pass_number: int
    bit_errors: int
    bad_words: int
    zero_bursts: int = Field(description="128-byte bursts that read back all zeros")
    first_bad: list[BadWordDocument]
    blocks: list[tuple[int, int]] = Field(description="(block, bad words), the first 64")
    blocks_failed: int
    duration_s: Number
    gib_per_s: Number = Field(description="bytes written and read on the card per second")
    planted: int = Field(description="self-test faults planted (--inject)")
    planted_found: int
    cycles: int


class MemtestCardDocument(Document):
    """One card's result: ``passed``, ``failed`` (bits flipped), ``timed_out`` and so on."""

    card: int
    pci_bus_id: str
    outcome: Literal[
        "passed", "failed", "timed_out", "error", "unavailable", "not_run", "stopped_hot"
    ]
    tested_mib: int
    bit_errors: int
    first_error_offset: int | None = Field(description="byte offset of the first bad word")
    pattern: str | None = Field(description="the pattern that found the first error")
    error: str | None = Field(description="CUDA's error name, or why the card was not tested")
    duration_s: Number
    bad_words: int = 0
    zero_bursts: int = 0
    blocks: list[tuple[int, int]] = Field(
        default_factory=list, description="the block map: (block, bad words), the first 512"
    )
    blocks_failed: int = 0
    blocks_tested: int = 0
    block_kib: int = Field(2048, description="the block map's unit")
    gib_per_s: Number = 0
    verdict: str | None = Field(
        None, description="a few fixed blocks, or errors everywhere under load (return it)"
    )
    runs: list[PatternRunDocument] = Field(default_factory=list)
    seed: int | None = None
    planted: int = 0
    planted_found: int = 0
    ts: IsoTime | None = None


class MemtestRunDocument(Document):
    """``POST /api/v1/diag/memtest``: this run's settings, results and fleetctl's exit code."""

    gib: Number | None = Field(description="GiB per card; null: all free memory")
    patterns: list[str]
    passes: int
    minutes: Number
    inject: bool
    seed: int
    cards: list[MemtestCardDocument]
    exit_code: int = Field(
        description="0 clean, 2 errors found, 1 a card could not be tested or a pass did not "
        "retest what failed"
    )
    message: str
    not_cleared: list[str] = Field(
        default_factory=list,
        description="cards that passed but whose earlier failure stands: this run did not "
        "test what failed (its patterns, the stress mode's minutes); each with the run that can",
    )


class MemtestProgressDocument(Document):
    """Where one card's running test is."""

    card: int
    pattern: str
    pass_number: int
    passes: int
    step: int = Field(description="the sweep (stress: the cycle) done")
    steps: int = Field(description="the pattern's sweeps (0 for stress)")
    bad_words: int


class MemtestOverviewDocument(Document):
    """``GET /api/v1/diag/memtest``: a run in progress, and each card's last verdict."""

    running: bool
    cards: list[MemtestCardDocument]
    progress: list[MemtestProgressDocument] = Field(
        default_factory=list, description="each card's progress while a run is under way"
    )


class CardDiagRequest(BaseModel):
    """``POST /api/v1/diag/pcie|compute`` body: one card or every card, and for how long."""

    model_config = ConfigDict(extra="forbid")
    card: Annotated[
        int | None, Field(ge=0, le=63, description="one card (NVML index); default every card")
    ] = None
    minutes: Annotated[
        float,
        Field(
            ge=0, le=MAX_MINUTES, description="compute: keep the SMs busy this long (0: one round)"
        ),
    ] = 0.0


class CardDiagCardDocument(Document):
    """One card's result of ``diag pcie`` or ``diag compute``."""

    card: int
    kind: Literal["pcie", "compute"]
    outcome: Literal["passed", "failed", "stopped_hot", "unavailable", "error", "timed_out"]
    verdict: str = Field(description="one line: what was found and what to do")
    figures: dict[str, Any] = Field(
        description="pcie: GB/s each way together and alone, the link, the expected rate; "
        "compute: results checked and wrong, the bad SMs, the temperatures"
    )
    findings: list[str]
    error: str | None = None
    pci_bus_id: str
    uuid: str
    serial: str | None = None


class CardDiagRunDocument(Document):
    """``POST /api/v1/diag/pcie|compute``: every card's result and fleetctl's exit code."""

    kind: Literal["pcie", "compute"]
    seconds: Number
    cards: list[CardDiagCardDocument]
    exit_code: int = Field(description="0 passed, 2 a finding (wrong, slow, hot), 1 untested")
    message: str


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
        responses=error_responses(400, 404, 409, 429, 503),
    )
    def memtest_run(body: MemtestRequest | None = None) -> dict[str, Any]:
        """Test each card's memory on the card (the engine must be stopped); answers when done."""
        request = body or MemtestRequest()
        return control().memtest(request.chosen(), request.plan(), "api", request.seed)

    @routes.get(
        "/api/v1/diag/memtest",
        response_model=MemtestOverviewDocument,
        response_model_exclude_unset=True,
        responses=error_responses(503),
    )
    def memtest_overview() -> dict[str, Any]:
        """Whether a memory test runs now, and each card's last verdict."""
        return control().memtest_document()

    def card_diag_route(kind: DiagKind, description: str) -> None:
        @routes.post(
            f"/api/v1/diag/{kind}",
            dependencies=token,
            response_model=CardDiagRunDocument,
            responses=error_responses(404, 409, 429, 503),
            name=f"diag_{kind}",
            summary=f"Run diag {kind}",
            description=description,
        )
        def run(body: CardDiagRequest | None = None) -> dict[str, Any]:
            request = body or CardDiagRequest()
            return control().card_diag(kind, request.card, "api", request.minutes * 60)

    card_diag_route(
        DiagKind.PCIE,
        "Test each card's link: bandwidth both ways with pinned buffers, data compared, "
        "judged against the link it trained at, all cards at once and each alone (the "
        "engine must be stopped); answers when done.",
    )
    card_diag_route(
        DiagKind.COMPUTE,
        "Check every SM's integer and FP32 FMA results and the FP16/INT8 tensor cores bit "
        "for bit (the engine must be stopped); answers when done.",
    )
    return routes
