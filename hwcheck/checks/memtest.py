"""``memtest``: a card whose memory failed the memory test stays critical until one passes.

The cards have no ECC: a flipped bit in HBM shows up as an engine crash that looks like a
software bug. Once ``fleetctl diag memtest`` found errors on a card (or the card hung the
driver during the test), the card is critical, across fleetd restarts and reboots, until
a later run passes on it. It is fleetd's check (the verdicts live in its store), judged
each poll from the stored verdicts, never by running the test.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hwcheck.checks.base import card_label
from hwcheck.memtest_results import CardMemtest, MemtestOutcome
from hwcheck.model import CheckResult, GpuSnapshot, Severity

CHECK_ID = "memtest"
REMEDY = (
    "the card's memory is bad (these cards have no ECC): keep it out of the recipe's gpus or "
    "replace it; after a fix, `fleetctl diag memtest --card {card}` again (a passing run "
    "clears this)"
)
REMEDY_HUNG = (
    "the card hung the driver during the memory test: reboot (fleetctl reboot --confirm), then "
    "`fleetctl diag memtest --card {card}` again (a passing run clears this)"
)


def check(
    cards: Sequence[GpuSnapshot], verdicts: Mapping[str, Mapping[str, Any]]
) -> list[CheckResult]:
    """One result per card that answers, from its last verdict (by PCI address)."""
    results: list[CheckResult] = []
    for card in sorted((c for c in cards if not c.lost), key=lambda c: c.index):
        label = card_label(card)
        stored = verdicts.get(card.pci_bus_id)
        if stored is None:
            results.append(
                CheckResult(CHECK_ID, card.index, Severity.OK, f"{label}: no memory test run yet")
            )
            continue
        verdict = CardMemtest.from_dict(dict(stored))
        when = str(stored.get("ts", ""))[:19].replace("T", " ")
        summary = verdict.summary().split(": ", 1)[-1]
        if verdict.outcome.failure:
            remedy = REMEDY_HUNG if verdict.outcome is MemtestOutcome.TIMED_OUT else REMEDY
            results.append(
                CheckResult(
                    CHECK_ID,
                    card.index,
                    Severity.CRITICAL,
                    f"{label}: memory test of {when} UTC: {summary}",
                    remedy.format(card=card.index),
                )
            )
        else:
            results.append(
                CheckResult(
                    CHECK_ID,
                    card.index,
                    Severity.OK,
                    f"{label}: memory test of {when} UTC: {summary}",
                )
            )
    return results
