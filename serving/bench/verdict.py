"""A run judged: against the recipe's reference figures, and against earlier runs.

Three answers, in the words owners use on the forums: "at reference"; "below reference:
check the power brake first" with the brake's reading (near a quarter of the figures is the
board holding PWRBRK#, and no setting fixes that); or "a regression since build X" naming
both builds, when an earlier build of this rig gave clearly more. While the brake is
asserted it is named first whatever else is true: every other figure is void until it is
released.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from hwcheck.card_ranges import cards_text
from serving.bench.figures import CellFigures
from serving.recipe.reference import ReferenceFigures

BELOW = 0.85  # under 85% of a figure is below it (runs vary by a few %)
AT_REFERENCE = "at_reference"
BELOW_REFERENCE = "below_reference"
REGRESSION = "regression"
NO_REFERENCE = "no_reference"
NOTHING_MEASURED = "nothing_measured"


@dataclass(frozen=True, slots=True)
class BrakeReading:
    """The power brake as the last poll read it."""

    braked_cards: tuple[int, ...]
    draw_w: tuple[float, ...] = ()
    sm_clock_mhz: tuple[int, ...] = ()

    def text(self) -> str:
        """``PWRBRK# asserted on cards 0-3 (88 W, 1,140 MHz)`` or ``not asserted``."""
        if not self.braked_cards:
            return "brake reading: PWRBRK# not asserted on any card"
        cards = cards_text(self.braked_cards)
        parts = []
        if self.draw_w:
            parts.append(f"{max(self.draw_w):.0f} W")
        if self.sm_clock_mhz:
            parts.append(f"{max(self.sm_clock_mhz):,} MHz")
        detail = f" ({', '.join(parts)})" if parts else ""
        return f"brake reading: PWRBRK# asserted on {cards}{detail}"


@dataclass(frozen=True, slots=True)
class EarlierRun:
    """An earlier run's headline figure: its id, its build, single-stream decode."""

    run_id: int
    build: str
    decode_tok_s: float


@dataclass(frozen=True, slots=True)
class Comparison:
    """One figure against its reference."""

    figure: str
    measured: float
    reference: float

    @property
    def ratio(self) -> float:
        """measured / reference."""
        return self.measured / self.reference


@dataclass(frozen=True, slots=True)
class Verdict:
    """The run's verdict: a status word and the sentence shown everywhere."""

    status: str
    text: str
    comparisons: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON form."""
        return asdict(self)


def headline_cell(cells: list[CellFigures]) -> CellFigures | None:
    """The single-stream cell the recipes quote: one stream, shortest depth, coolest sampling."""
    single = [c for c in cells if c.concurrency == 1 and c.decode_tok_s_per_stream is not None]
    if not single:
        return None
    return min(single, key=lambda c: (c.depth_tokens, c.temperature))


def prefill_cell(cells: list[CellFigures]) -> CellFigures | None:
    """The single-stream cell with the longest prompt: prefill's rate, not its fixed costs."""
    single = [c for c in cells if c.concurrency == 1 and c.prefill_tok_s is not None]
    if not single:
        return None
    return max(single, key=lambda c: (c.depth_tokens, -c.temperature))


def comparisons(cells: list[CellFigures], reference: ReferenceFigures) -> list[Comparison]:
    """Each measured figure the reference has a value for."""
    found: list[Comparison] = []
    head = headline_cell(cells)
    if head is not None and reference.decode_tok_s and head.decode_tok_s_per_stream:
        found.append(
            Comparison("decode tok/s", head.decode_tok_s_per_stream, reference.decode_tok_s)
        )
    deep = prefill_cell(cells)
    if deep is not None and reference.prefill_tok_s and deep.prefill_tok_s:
        found.append(Comparison("prefill tok/s", deep.prefill_tok_s, reference.prefill_tok_s))
    if reference.concurrent_total_tok_s and reference.concurrency:
        wide = [
            c
            for c in cells
            if c.concurrency == reference.concurrency and c.decode_tok_s_total is not None
        ]
        if wide:
            best = max(c.decode_tok_s_total or 0.0 for c in wide)
            found.append(
                Comparison(
                    f"total tok/s at {reference.concurrency}",
                    best,
                    reference.concurrent_total_tok_s,
                )
            )
    return found


def _words(comparison: Comparison) -> str:
    return (
        f"{comparison.figure} {comparison.measured:,.1f} against {comparison.reference:,.1f} "
        f"({comparison.ratio:.0%})"
    )


def judge(
    cells: list[CellFigures],
    reference: ReferenceFigures | None,
    brake: BrakeReading,
    build: str,
    earlier_same_build: EarlierRun | None = None,
    earlier_other_build: EarlierRun | None = None,
) -> Verdict:
    """The verdict of a run on ``build`` (its name as ``fleetctl builds`` shows it)."""
    head = headline_cell(cells)
    if head is None or head.decode_tok_s_per_stream is None:
        if brake.braked_cards:
            return Verdict(BELOW_REFERENCE, f"no single-stream figure measured; {brake.text()}")
        return Verdict(NOTHING_MEASURED, "no single-stream figure measured (see the cells' errors)")
    found = comparisons(cells, reference) if reference is not None else []
    shown = [asdict(c) | {"ratio": round(c.ratio, 3)} for c in found]
    below = [c for c in found if c.ratio < BELOW]
    decode = head.decode_tok_s_per_stream
    if brake.braked_cards and (below or reference is None):
        detail = "; ".join(_words(c) for c in below) or f"decode {decode:,.1f} tok/s"
        return Verdict(
            BELOW_REFERENCE,
            f"below reference: check the power brake first ({brake.text()}); {detail}",
            shown,
        )
    other = earlier_other_build
    if other is not None and decode < BELOW * other.decode_tok_s:
        return Verdict(
            REGRESSION,
            f"a regression since build {other.build}: decode {other.decode_tok_s:,.1f} tok/s "
            f"on build {other.build} (run {other.run_id}), {decode:,.1f} on build {build}",
            shown,
        )
    same = earlier_same_build
    drift = ""
    if same is not None and decode < BELOW * same.decode_tok_s:
        drift = (
            f"; {decode / same.decode_tok_s:.0%} of run {same.run_id} on this build "
            f"({same.decode_tok_s:,.1f} tok/s)"
        )
    if below:
        return Verdict(
            BELOW_REFERENCE,
            f"below reference: check the power brake first ({brake.text()}), then the caps in "
            f"force, thermal throttling and the PCIe link; "
            + "; ".join(_words(c) for c in below)
            + drift,
            shown,
        )
    if reference is None:
        return Verdict(
            NO_REFERENCE,
            f"no reference figures in this recipe; decode {decode:,.1f} tok/s single stream"
            + drift,
            shown,
        )
    detail = "; ".join(_words(c) for c in found) or f"decode {decode:,.1f} tok/s"
    if drift:
        return Verdict(
            BELOW_REFERENCE, f"below an earlier run of this build: {detail}{drift}", shown
        )
    return Verdict(AT_REFERENCE, f"at reference: {detail}", shown)
