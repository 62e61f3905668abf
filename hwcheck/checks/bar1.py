"""``bar1``: each card still has the BAR1 aperture it had at the baseline.

Behind PLX switches the 64 GB BAR1 needs the bridge-window patch and its kernel arguments;
booted without them the cards come up with the stock 256 MiB, and P2P and large
transfers fail in ways that look like an engine hang. A card below its baseline is
critical; a card the driver does not report BAR1 for is not judged.
"""

from __future__ import annotations

from hwcheck.checks.base import CheckInput, card_label, fmt_num
from hwcheck.model import CheckResult, Severity

CHECK_ID = "bar1"
REMEDY = (
    "boot the patched kernel with its kernel arguments (see host_kernel and kernel_cmdline: "
    "pci= bridge windows behind the PLX switches), then reboot; a card that alone lost it: "
    "reseat it"
)


def check(inp: CheckInput) -> list[CheckResult]:
    """One result per card that answers (none where the host facts are not read)."""
    if inp.host is None:
        return []
    results: list[CheckResult] = []
    for card in inp.live_cards():
        label = card_label(card)
        have = card.bar1_total_mib
        want = inp.baseline.card(card.pci_bus_id).bar1_mib
        if have is None:
            results.append(CheckResult(CHECK_ID, card.index, Severity.OK, f"{label}: BAR1 n/a"))
        elif want is not None and have < want:
            results.append(
                CheckResult(
                    CHECK_ID,
                    card.index,
                    Severity.CRITICAL,
                    f"{label}: BAR1 {fmt_num(have, 'MiB')}, baseline {fmt_num(want, 'MiB')}: "
                    "the 64 GB BAR1 is gone: the bridge-window patch or kernel arguments "
                    "are missing",
                    REMEDY,
                )
            )
        else:
            results.append(
                CheckResult(
                    CHECK_ID, card.index, Severity.OK, f"{label}: BAR1 {fmt_num(have, 'MiB')}"
                )
            )
    return results
