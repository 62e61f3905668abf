"""``card_lost``: a card that stopped answering NVML (GPU is lost, reset required).

Why critical: a lost card cannot be reset on these boards (``nvidia-smi -r`` is not
supported), so only a reboot brings it back, and a recurring one is a cold power cycle.
"""

from __future__ import annotations

from hwcheck.checks import card_count, cuda_probe, memtest
from hwcheck.checks.base import CheckInput, card_label
from hwcheck.checks.spec import Alert, CheckSpec, CheckText, DrawnAt
from hwcheck.model import CheckResult, Severity

CHECK_ID = "card_lost"


def check(inp: CheckInput) -> list[CheckResult]:
    """One result per card of the latest sample."""
    results: list[CheckResult] = []
    for card in sorted(inp.now.cards, key=lambda c: c.index):
        if card.lost:
            reason = card.lost_reason or "no reason given"
            results.append(
                CheckResult(
                    CHECK_ID,
                    card.index,
                    Severity.CRITICAL,
                    f"{card_label(card)} is lost: {reason}",
                    "reboot the host (cold power cycle: power off fully for 30 s if it recurs)",
                )
            )
        else:
            results.append(
                CheckResult(CHECK_ID, card.index, Severity.OK, f"{card_label(card)} answers")
            )
    return results


SPEC = CheckSpec(
    id=CHECK_ID,
    run=check,
    text=CheckText(
        "card lost",
        "NVML says the GPU is lost, needs a reset, or does not answer at all. On these cards "
        "nvidia-smi -r is not supported, and a driver reload after a fault has turned one "
        "wedged card into four (Xid 154): only a reboot clears it.",
        "fleetctl reboot --confirm (a cold power cycle, --cold, if it comes back); never "
        "rmmod nvidia_uvm.",
    ),
    alert=Alert("CardLost", "Card lost"),
    tag="LOST",
    explains=frozenset({card_count.CHECK_ID, cuda_probe.CHECK_ID, memtest.CHECK_ID}),
    gate=True,
    drawn_at=DrawnAt.CARD_LOST,
)
