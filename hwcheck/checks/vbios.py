"""``vbios``: each card runs the VBIOS recorded at the baseline.

The VBIOS sets the card's clock table: an old one gives a 1,458 MHz memory clock instead
of 1,728 (about 16% less memory bandwidth, and decode is bandwidth-bound). A card
reflashed, or swapped for one with another VBIOS, is a warning with that cost when the
clocks show it; it is never critical (the card works, slower).
"""

from __future__ import annotations

from hwcheck.checks.base import CheckInput
from hwcheck.checks.clocks import bandwidth_cost
from hwcheck.checks.host_cards import Verdict, judge_cards, ok
from hwcheck.checks.spec import Alert, CheckSpec, CheckText
from hwcheck.hostfacts.baseline import CardBaseline
from hwcheck.model import CheckResult, GpuSnapshot, Severity

CHECK_ID = "vbios"


def _judge(card: GpuSnapshot, base: CardBaseline) -> Verdict:
    have, want = card.vbios_version, base.vbios
    if have is None or want is None or have == want:
        return ok(f"VBIOS {have or 'n/a'}")
    cost = bandwidth_cost(card.memory_clock_max_mhz, base.memory_clock_max_mhz)
    return (
        Severity.WARNING,
        f"VBIOS {have}, not the baseline {want}" + (f"; {cost}" if cost else ""),
        f"flash the baseline VBIOS {want} back (nvflash), or if {have} is meant record it: "
        f'[host.cards."{card.pci_bus_id}"] vbios = "{have}"',
    )


def check(inp: CheckInput) -> list[CheckResult]:
    """One result per card that answers (none where the host facts are not read)."""
    return judge_cards(inp, CHECK_ID, _judge)


SPEC = CheckSpec(
    id=CHECK_ID,
    run=check,
    text=CheckText(
        "VBIOS changed",
        "A card's VBIOS differs from the baseline (a flash, a swapped card).",
        "flash the baseline VBIOS back, or record the new one (fleetctl init --force).",
    ),
    alert=Alert("VbiosChanged", "VBIOS changed"),
    tag="VBIOS",
    host_panel=True,
)
