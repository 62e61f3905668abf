"""``vbios``: each card runs the VBIOS recorded at the baseline.

The VBIOS sets the card's clock table: an old one gives a 1,458 MHz memory clock instead
of 1,728 (about 16% less memory bandwidth, and decode is bandwidth-bound). A card
reflashed, or swapped for one with another VBIOS, is a warning with that cost when the
clocks show it; it is never critical (the card works, slower).
"""

from __future__ import annotations

from hwcheck.checks.base import CheckInput, card_label
from hwcheck.checks.clocks import bandwidth_cost
from hwcheck.model import CheckResult, Severity

CHECK_ID = "vbios"


def check(inp: CheckInput) -> list[CheckResult]:
    """One result per card that answers (none where the host facts are not read)."""
    if inp.host is None:
        return []
    results: list[CheckResult] = []
    for card in inp.live_cards():
        label = card_label(card)
        base = inp.baseline.card(card.pci_bus_id)
        have, want = card.vbios_version, base.vbios
        if have is None or want is None or have == want:
            shown = have or "n/a"
            results.append(
                CheckResult(CHECK_ID, card.index, Severity.OK, f"{label}: VBIOS {shown}")
            )
            continue
        cost = bandwidth_cost(card.memory_clock_max_mhz, base.memory_clock_max_mhz)
        results.append(
            CheckResult(
                CHECK_ID,
                card.index,
                Severity.WARNING,
                f"{label}: VBIOS {have}, not the baseline {want}" + (f"; {cost}" if cost else ""),
                f"flash the baseline VBIOS {want} back (nvflash), or if {have} is meant record "
                f'it: [host.cards."{card.pci_bus_id}"] vbios = "{have}"',
            )
        )
    return results
