"""The PCIe link tested: bandwidth both ways with pinned buffers, data compared, judged.

These cards sit on Gen1/Gen2 x4 risers: a card that trained at Gen1 loads its weights at
half speed (0.82 GB/s host-to-device at Gen1 x4 against 1.63 GB/s after a Gen2 retrain,
mazzanfar's Proxmox measurements; docs/domain.md), and a riser that corrupts data in
transit corrupts the weights. The figure is judged against what the link the card trained
at should carry (about 81% of the raw rate after 8b/10b and protocol overheads, as those
measurements show) and against the rig's expected link (``[rig] pcie_gen_min``/``width``,
the baseline), so the verdict says which to fix: "Gen1 x4: 0.8 GB/s, expected about 1.6
at Gen2 x4: reseat or retrain". Each card is measured with every card at once (a shared
switch or the CPU's lanes show there) and alone.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Protocol

from hwcheck.carddiag.model import CardDiag, DiagKind, DiagOutcome, DiagPlan
from hwcheck.thermal_stop import StopAsked

# Raw GB/s per lane by generation, and the share a DMA copy reaches (0.816 of 1.0 at Gen1
# x4; 1.628 of 2.0 at Gen2 x4).
RAW_GB_PER_LANE = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
EFFECTIVE_SHARE = 0.81
SLOW_SHARE = 0.6  # below this share of the trained link's figure: something else is wrong
SHARED_SHARE = 0.75  # all-at-once below this share of alone: the lanes are shared


def expected_gb_per_s(gen: int | None, width: int | None) -> float | None:
    """What a healthy link of ``gen`` x ``width`` carries in one direction (GB/s)."""
    if not gen or not width or gen not in RAW_GB_PER_LANE:
        return None
    return RAW_GB_PER_LANE[gen] * width * EFFECTIVE_SHARE


@dataclass(frozen=True)
class Link:
    """The link the card trained at, its maximum, and what the rig expects."""

    gen: int | None
    width: int | None
    max_gen: int | None = None
    max_width: int | None = None
    expected_gen: int | None = None  # the baseline's or ``[rig] pcie_gen_min``
    expected_width: int | None = None

    def text(self) -> str:
        """``Gen2 x4``."""
        return f"Gen{self.gen or '?'} x{self.width or '?'}"

    def target(self) -> tuple[int | None, int | None]:
        """The link it should have trained at: the rig's expectation, capped by the card's maximum."""
        gen = self.expected_gen or self.max_gen
        width = self.expected_width or self.max_width
        if gen and self.max_gen:
            gen = min(gen, self.max_gen)
        if width and self.max_width:
            width = min(width, self.max_width)
        return gen, width


class LinkTarget(Protocol):
    """A card whose link can be measured (libcuda through ctypes, or simulated)."""

    def copy_s(self, nbytes: int, to_device: bool) -> float:
        """Seconds one pinned copy of ``nbytes`` takes in that direction."""
        ...

    def round_trip_mismatches(self, nbytes: int, seed: int) -> int:
        """Bytes that differ after host -> card -> host of a known pattern."""
        ...


@dataclass
class LinkFigures:
    """One measurement: GB/s each way and the bytes that changed in transit."""

    h2d_gb_per_s: float
    d2h_gb_per_s: float
    mismatched_bytes: int
    compared_bytes: int


def measure(target: LinkTarget, plan: DiagPlan, stop: StopAsked) -> LinkFigures | str:
    """The median of ``plan.repeats`` copies each way and one compared round trip.

    Returns why it stopped (too hot) instead, when ``stop`` says so.
    """
    nbytes = plan.transfer_mib << 20
    rates: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(max(1, plan.repeats)):
        for to_device in (True, False):
            why = stop()
            if why is not None:
                return why
            seconds = target.copy_s(nbytes, to_device)
            rates[to_device].append(nbytes / seconds / 1e9 if seconds > 0 else float("inf"))
    mismatched = target.round_trip_mismatches(nbytes, 0xC0FFEE)
    return LinkFigures(
        statistics.median(rates[True]), statistics.median(rates[False]), mismatched, nbytes
    )


def judge(
    card: int, link: Link, together: LinkFigures | None, alone: LinkFigures | None
) -> CardDiag:
    """The verdict: data changed in transit, a link below its target, slow for its link, or fine."""
    figures: dict[str, object] = {"link": link.text(), "gen": link.gen, "width": link.width}
    for name, measured in (("together", together), ("alone", alone)):
        if measured is not None:
            figures[f"h2d_gb_per_s_{name}"] = round(measured.h2d_gb_per_s, 3)
            figures[f"d2h_gb_per_s_{name}"] = round(measured.d2h_gb_per_s, 3)
    best = alone or together
    if best is None:
        return CardDiag(card, DiagKind.PCIE, DiagOutcome.ERROR, "nothing was measured", figures)
    expected_now = expected_gb_per_s(link.gen, link.width)
    target_gen, target_width = link.target()
    expected_target = expected_gb_per_s(target_gen, target_width)
    figures["expected_gb_per_s"] = None if expected_now is None else round(expected_now, 2)
    h2d = best.h2d_gb_per_s
    findings: list[str] = []
    mismatched = sum(m.mismatched_bytes for m in (together, alone) if m is not None)
    figures["mismatched_bytes"] = mismatched
    if mismatched:
        verdict = (
            f"{mismatched:,} bytes changed in transit over {link.text()}: the riser, the "
            "slot or the card's link corrupts data; reseat, then replace the riser"
        )
        return CardDiag(card, DiagKind.PCIE, DiagOutcome.FAILED, verdict, figures, findings)
    below_target = (
        expected_target is not None
        and (target_gen or 0, target_width or 0) > (link.gen or 0, link.width or 0)
        and (link.gen or 0) <= (target_gen or 0)
        and (link.width or 0) <= (target_width or 0)
    )
    if below_target and expected_target is not None:
        verdict = (
            f"{link.text()}: {h2d:.1f} GB/s, expected about {expected_target:.1f} at "
            f"Gen{target_gen} x{target_width}: reseat or retrain (a reboot retrains)"
        )
        return CardDiag(card, DiagKind.PCIE, DiagOutcome.FAILED, verdict, figures, findings)
    if expected_now is not None and h2d < SLOW_SHARE * expected_now:
        verdict = (
            f"{link.text()}: {h2d:.2f} GB/s, expected about {expected_now:.1f} for its link: "
            "a bad riser or a slot sharing its lanes; reseat, try another riser"
        )
        return CardDiag(card, DiagKind.PCIE, DiagOutcome.FAILED, verdict, figures, findings)
    if (
        together is not None
        and alone is not None
        and together.h2d_gb_per_s < SHARED_SHARE * alone.h2d_gb_per_s
    ):
        findings.append(
            f"{together.h2d_gb_per_s:.2f} GB/s with every card at once against "
            f"{alone.h2d_gb_per_s:.2f} alone: the cards share a switch or the CPU's lanes"
        )
    verdict = (
        f"{link.text()}: {h2d:.2f} GB/s to the card, {best.d2h_gb_per_s:.2f} back, "
        f"{best.compared_bytes >> 20} MiB compared intact"
    )
    return CardDiag(card, DiagKind.PCIE, DiagOutcome.PASSED, verdict, figures, findings)
