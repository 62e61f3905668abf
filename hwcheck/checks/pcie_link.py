"""``pcie_link``: each card's PCIe link must train as well as its baseline.

These rigs run on Gen2 x4 risers, so "not x16" is normal and never alerted on. The
baseline is the card's recorded one (``fleetctl init``) or the profile's minimum.
Width is judged strictly (a link that trained x1 is a riser or cable fault). The
generation is judged on the link's maximum, because idle GPUs drop the current
generation to save power; a low current generation is only a warning when the card is
busy (no GPU-idle reason bit), which is the "trained Gen1 after boot" case a retrain fixes.
"""

from __future__ import annotations

from hwcheck.checks.base import CheckInput, card_label
from hwcheck.checks.spec import Alert, CheckSpec, CheckText, DrawnAt
from hwcheck.model import CheckResult, ClockEventReason, GpuSnapshot, RigProfile, Severity

CHECK_ID = "pcie_link"


def _link(gen: int | None, width: int | None) -> str:
    """``Gen2 x4`` with ``?`` for an unknown part."""
    return f"Gen{gen if gen is not None else '?'} x{width if width is not None else '?'}"


def _is_idle(card: GpuSnapshot) -> bool:
    """True when the card says it is idle, or says nothing (benefit of the doubt)."""
    if card.clock_event_reasons is None:
        return True
    return bool(card.clock_event_reasons & ClockEventReason.GPU_IDLE)


def baseline(profile: RigProfile, pci_bus_id: str) -> tuple[int, int]:
    """``(gen, width)`` the card at ``pci_bus_id`` should train: recorded, else the minimum."""
    recorded = profile.pcie_baseline.get(pci_bus_id)
    if recorded is not None:
        return recorded.gen, recorded.width
    return profile.pcie_gen_min, profile.pcie_width_min


def _judge(inp: CheckInput, card: GpuSnapshot) -> CheckResult:
    """Judge one live card against its baseline."""
    base_gen, base_width = baseline(inp.profile, card.pci_bus_id)
    label = card_label(card)
    now = _link(card.pcie_gen_current, card.pcie_width_current)
    facts = (
        f"PCIe {now} (max {_link(card.pcie_gen_max, card.pcie_width_max)}; "
        f"baseline {_link(base_gen, base_width)})"
    )
    width = card.pcie_width_current
    gen_best = card.pcie_gen_max if card.pcie_gen_max is not None else card.pcie_gen_current
    if width is None or gen_best is None:
        return CheckResult(
            CHECK_ID,
            card.index,
            Severity.WARNING,
            f"{label}: {facts}: link not available",
            "check nvidia-smi -q -d PCIE for this card",
        )
    problems: list[str] = []
    remedies: list[str] = []
    if width < base_width:
        problems.append(f"link trained x{width}")
        remedies.append("reseat riser/check cable")
    if gen_best < base_gen:
        problems.append(f"link capable of Gen{gen_best} only")
        remedies.append("check the riser and the slot's PCIe generation setting in the BIOS")
    elif (
        card.pcie_gen_current is not None
        and card.pcie_gen_current < base_gen
        and not _is_idle(card)
    ):
        problems.append(f"link at Gen{card.pcie_gen_current} while busy")
        remedies.append("reboot to retrain the link; reseat the riser if it recurs")
    if problems:
        return CheckResult(
            CHECK_ID,
            card.index,
            Severity.WARNING,
            f"{label}: {'; '.join(problems)}: {facts}",
            "; ".join(remedies),
        )
    note = ""
    if card.pcie_gen_current is not None and card.pcie_gen_current < base_gen:
        note = " (lower generation now: idle link power saving)"
    return CheckResult(CHECK_ID, card.index, Severity.OK, f"{label}: {facts}{note}")


def check(inp: CheckInput) -> list[CheckResult]:
    """One result per live card."""
    return [_judge(inp, card) for card in inp.live_cards()]


SPEC = CheckSpec(
    id=CHECK_ID,
    run=check,
    text=CheckText(
        "PCIe link degraded",
        "These rigs run Gen2 x4 risers; a link below the card's recorded baseline (Gen1 after "
        "a boot, x1 on a bad riser) slows weight loading and pipeline-parallel traffic. An "
        "idle card may show a lower generation: it is judged against the baseline, never x16.",
        "reseat or replace the riser; a retrain (reboot) often brings Gen1 back to Gen2.",
    ),
    alert=Alert("PcieLinkDegraded", "PCIe link degraded"),
    tag="LINK",
    drawn_at=DrawnAt.CARD_PCIE,
)
