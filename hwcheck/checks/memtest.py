"""``memtest``: a card whose memory failed the memory test stays critical until one passes.

The cards have no ECC: a flipped bit in HBM shows up as an engine crash that looks like a
software bug. Once ``fleetctl diag memtest`` found errors on a card (or the card hung the
driver during the test), the card is critical, across fleetd restarts and reboots, until
a later run passes on it. It is fleetd's check (the verdicts live in its store, and reach
the check as ``readings.memtest``), judged each poll from the stored verdicts, never by
running the test.
"""

from __future__ import annotations

from collections.abc import Sequence

from hwcheck.checks.base import CheckInput, card_label
from hwcheck.checks.readings import MemtestReading
from hwcheck.checks.spec import Alert, CheckSpec, CheckText, DrawnAt
from hwcheck.memtest.results import MemtestOutcome
from hwcheck.model import CheckResult, GpuSnapshot, Severity

CHECK_ID = "memtest"
REMEDY = (
    "the card's memory is bad (these cards have no ECC): keep it out of the recipe's gpus or "
    "replace it; after a fix, `{command}` (a passing run of what failed clears this)"
)
REMEDY_HUNG = (
    "the card hung the driver during the memory test: reboot (fleetctl reboot --confirm), then "
    "`{command}` (a passing run of what hung clears this)"
)


def check(inp: CheckInput) -> list[CheckResult]:
    """The registry's entry: the latest sample's cards against ``readings.memtest``."""
    reading = inp.readings.memtest
    return [] if reading is None else judge(inp.now.cards, reading)


def judge(cards: Sequence[GpuSnapshot], reading: MemtestReading) -> list[CheckResult]:
    """One result per card that answers, from its last verdict (by PCI address)."""
    results: list[CheckResult] = []
    for card in sorted((c for c in cards if not c.lost), key=lambda c: c.index):
        label = card_label(card)
        stored = reading.verdicts.get(card.pci_bus_id)
        if stored is None:
            results.append(
                CheckResult(CHECK_ID, card.index, Severity.OK, f"{label}: no memory test run yet")
            )
            continue
        verdict = stored.result
        when = stored.tested_at[:19].replace("T", " ")
        summary = verdict.summary().split(": ", 1)[-1]
        if verdict.outcome.failure:
            remedy = REMEDY_HUNG if verdict.outcome is MemtestOutcome.TIMED_OUT else REMEDY
            results.append(
                CheckResult(
                    CHECK_ID,
                    card.index,
                    Severity.CRITICAL,
                    f"{label}: memory test of {when} UTC: {summary}",
                    remedy.format(command=stored.retest.command(card.index)),
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


SPEC = CheckSpec(
    id=CHECK_ID,
    run=check,
    text=CheckText(
        "memory test failed",
        "fleetctl diag memtest wrote and verified patterns on the card and found flipped "
        "bits (or the driver hung): its HBM is faulty, and an engine on it corrupts output.",
        "keep the card out of the profile (gpus) or replace it; test again after a fix.",
    ),
    alert=Alert("MemoryTestFailed", "Memory test failed"),
    tag="MEMTEST",
    gate=True,
    host_panel=True,
    drawn_at=DrawnAt.MEMORY_MAP,
)
