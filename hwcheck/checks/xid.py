"""``xid_since_boot``: every Xid of this boot, per card, judged by the catalogue.

A hardware-class Xid (or one whose advised action is a reboot or cold power cycle)
means the card may be wedged even if NVML still looks normal: critical. Application-
class ones alone are warnings. Xids without a PCI address (old drivers) or with an
address no card has are reported in one rig-wide result (``card=None``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from hwcheck.checks.base import CheckInput, card_label
from hwcheck.model import CheckResult, ClassifiedXid, Severity, XidAction, XidClass

CHECK_ID = "xid_since_boot"

# Most drastic first: the remedy of a group is that of its most drastic action.
_ACTION_ORDER = (
    XidAction.COLD_POWER_CYCLE,
    XidAction.REBOOT,
    XidAction.INSPECT,
    XidAction.RESTART_ENGINE,
    XidAction.NONE,
)
REMEDIES: dict[XidAction, str] = {
    XidAction.COLD_POWER_CYCLE: (
        "cold power cycle: power off fully for 30 s; a warm reboot is not enough"
    ),
    XidAction.REBOOT: (
        "stop the engine (fleetctl stop), then reboot the host (sudo systemctl reboot); "
        "do not reload nvidia_uvm or run nvidia-smi -r"
    ),
    XidAction.INSPECT: "inspect the kernel log around it (dmesg | grep -i xid) and the engine log",
    XidAction.RESTART_ENGINE: "restart the engine (fleetctl restart); the card itself is healthy",
    XidAction.NONE: "no action needed; watch for repeats",
}
_REBOOT_ACTIONS = frozenset({XidAction.REBOOT, XidAction.COLD_POWER_CYCLE})


def _is_hardware(x: ClassifiedXid) -> bool:
    """True for an Xid that means the card needs a reboot."""
    return x.info.xid_class is XidClass.HARDWARE or x.info.action in _REBOOT_ACTIONS


def xid_severity(x: ClassifiedXid) -> Severity:
    """The one rule for how bad an Xid is: this check and the stored Xid event both use it.

    Critical when the card needs a reboot (hardware class, or a reboot/cold power cycle
    advised, as for Xid 38 or a ``[xid.N]`` override); otherwise a warning.
    """
    return Severity.CRITICAL if _is_hardware(x) else Severity.WARNING


def _summary(xids: Sequence[ClassifiedXid]) -> str:
    """``2 Xid since boot: 31 x2`` (numbers in first-seen order)."""
    counts = Counter(x.event.xid for x in xids)
    listed = ", ".join(f"{xid} x{n}" for xid, n in counts.items())
    return f"{len(xids)} Xid since boot: {listed}"


def _verdict(card: int | None, prefix: str, xids: Sequence[ClassifiedXid]) -> CheckResult:
    """One result for a group of Xids (those of one card, or the unattributed ones)."""
    if not xids:
        return CheckResult(CHECK_ID, card, Severity.OK, f"{prefix}: no Xid since boot")
    worst = min(xids, key=lambda x: _ACTION_ORDER.index(x.info.action))
    hardware = [x for x in xids if xid_severity(x) is Severity.CRITICAL]
    severity = Severity.CRITICAL if hardware else Severity.WARNING
    lead = min(hardware, key=lambda x: _ACTION_ORDER.index(x.info.action)) if hardware else worst
    why = f"Xid {lead.event.xid} ({lead.info.xid_class.value}): {lead.info.explanation}"
    return CheckResult(
        CHECK_ID,
        card,
        severity,
        f"{prefix}: {_summary(xids)}; {why}",
        REMEDIES[worst.info.action],
    )


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
    results = [_verdict(c.index, card_label(c), per_card[c.index]) for c in cards]
    addresses = sorted({x.event.pci_bus_id or "no PCI address" for x in unattributed})
    prefix = "rig (Xids not tied to a card"
    prefix += f": {', '.join(addresses)})" if addresses else ")"
    results.append(_verdict(None, prefix, unattributed))
    return results
