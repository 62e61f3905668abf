"""``xid_since_boot``: every Xid of this boot, per card, judged by the catalogue.

An Xid that latches (``XidInfo.latches``: hardware class, or a reboot or cold power cycle
advised) means the card may be wedged even if NVML still looks normal: critical. Others
alone are warnings. Xids without a PCI address (old drivers) or with an address no card
has are reported in one rig-wide result (``card=None``). Xids a person waived by clearing
the latch (``LatchWaiver``) still count, shown as cleared, but are warnings: they no longer
refuse a start.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from hwcheck.advice import ACTION_STEPS, RigNow
from hwcheck.checks.base import CheckInput, card_label
from hwcheck.checks.spec import CheckSpec, CheckText, DrawnAt
from hwcheck.model import CheckResult, ClassifiedXid, LatchWaiver, Severity, XidAction

CHECK_ID = "xid_since_boot"

# Most drastic first: the remedy of a group is that of its most drastic action.
_ACTION_ORDER = (
    XidAction.COLD_POWER_CYCLE,
    XidAction.REBOOT,
    XidAction.INSPECT,
    XidAction.RESTART_ENGINE,
    XidAction.NONE,
)


def xid_severity(x: ClassifiedXid) -> Severity:
    """The one rule for how bad an Xid is: this check and the stored Xid event both use it.

    Critical when it latches (``XidInfo.latches``); otherwise a warning.
    """
    return Severity.CRITICAL if x.info.latches else Severity.WARNING


def _summary(xids: Sequence[ClassifiedXid]) -> str:
    """``2 Xid since boot: 31 x2`` (numbers in first-seen order)."""
    counts = Counter(x.event.xid for x in xids)
    listed = ", ".join(f"{xid} x{n}" for xid, n in counts.items())
    return f"{len(xids)} Xid since boot: {listed}"


def _verdict(
    card: int | None,
    prefix: str,
    xids: Sequence[ClassifiedXid],
    waiver: LatchWaiver | None,
    now: RigNow,
) -> CheckResult:
    """One result for a group of Xids (those of one card, or the unattributed ones).

    The message names the leading Xid by its title only: its explanation is the status
    document's, once (``explanations``), not repeated in every result that mentions it.
    """
    if not xids:
        return CheckResult(CHECK_ID, card, Severity.OK, f"{prefix}: no Xid since boot")
    worst = min(xids, key=lambda x: _ACTION_ORDER.index(x.info.action))
    hardware = [x for x in xids if x.info.latches]
    live = [x for x in hardware if waiver is None or not waiver.covers(x.event)]
    severity = Severity.CRITICAL if live else Severity.WARNING
    lead_from = live or hardware
    lead = min(lead_from, key=lambda x: _ACTION_ORDER.index(x.info.action)) if lead_from else worst
    message = f"{prefix}: {_summary(xids)}; {lead.info.headline(None)}"
    if hardware and not live and waiver is not None:
        message += f" ({waiver.label})"
    if live:
        action = min(live, key=lambda x: _ACTION_ORDER.index(x.info.action)).info.action
    elif hardware:  # all waived by a person: nothing to do unless it repeats
        action = XidAction.NONE
    else:
        action = worst.info.action
    remedy = ACTION_STEPS[action].text(now)
    return CheckResult(CHECK_ID, card, severity, message, remedy)


def check(inp: CheckInput) -> list[CheckResult]:
    """One result per card of the latest sample (lost ones too) and one rig-wide."""
    cards = sorted(inp.now.cards, key=lambda c: c.index)
    by_bus = {c.pci_bus_id: c.index for c in cards}
    per_card: dict[int, list[ClassifiedXid]] = {c.index: [] for c in cards}
    unattributed: list[ClassifiedXid] = []
    for x in inp.xids:
        index = by_bus.get(x.event.pci_bus_id) if x.event.pci_bus_id else None
        if index is None:
            unattributed.append(x)
        else:
            per_card[index].append(x)
    waiver = inp.waiver
    now = inp.rig_now
    results = [_verdict(c.index, card_label(c), per_card[c.index], waiver, now) for c in cards]
    addresses = sorted({x.event.pci_bus_id or "no PCI address" for x in unattributed})
    prefix = "rig (Xids not tied to a card"
    prefix += f": {', '.join(addresses)})" if addresses else ")"
    results.append(_verdict(None, prefix, unattributed, waiver, now))
    return results


SPEC = CheckSpec(
    id=CHECK_ID,
    run=check,
    text=CheckText(
        "Xid errors this boot",
        "The driver reported an Xid in the kernel log. On these cards Xid 31 has preceded "
        "wedges and is treated as hardware-class; GSP/PMU faults (62, 119, 120, 154 code 0x7) "
        "need a full power-off. A hardware-class Xid latches the reboot prompt.",
        "the Xid's own step (fleetctl explain xid N): usually fleetctl reboot --confirm.",
    ),
    alert=None,  # alerts through its own events
    gate=True,
    drawn_at=DrawnAt.CARD_XIDS,
)
