"""``card_count``: NVML, the PCI bus and the profile must agree on how many cards there are.

Why three sources: a card on the bus but missing from NVML dropped off the driver (a
reboot fixes it, a recurring one is a riser or power problem); a card missing from the
bus too has physically gone (riser, power cable); more cards than expected is odd but
harmless.
"""

from __future__ import annotations

from hwcheck.checks.base import CheckInput
from hwcheck.checks.spec import Alert, CheckSpec, CheckText
from hwcheck.model import CheckResult, Severity

CHECK_ID = "card_count"

_DROPPED_REMEDY = "reboot; reseat the riser and check the card's power cables if it recurs"
_GONE_REMEDY = (
    "the card is gone from the PCI bus: power off, reseat its riser and cable, "
    "check its PCIe power connectors"
)


def check(inp: CheckInput) -> list[CheckResult]:
    """One rig-wide result."""
    nvml_ids = {c.pci_bus_id for c in inp.now.cards}
    pci_ids = {d.pci_bus_id for d in inp.pci_devices}
    nvml_n, pci_n = len(inp.now.cards), len(pci_ids)
    expected = inp.profile.card_count
    counts = f"NVML sees {nvml_n} card(s), the PCI bus has {pci_n} CMP 170HX device(s)"
    if expected is not None:
        counts += f", {expected} expected"

    not_in_nvml = sorted(pci_ids - nvml_ids)
    if not_in_nvml:
        missing = ", ".join(not_in_nvml)
        return [
            CheckResult(
                CHECK_ID,
                None,
                Severity.CRITICAL,
                f"{counts}: a card dropped off NVML (on the bus, not in NVML: {missing})",
                _DROPPED_REMEDY,
            )
        ]
    if expected is not None and nvml_n < expected:
        remedy = _GONE_REMEDY if pci_ids and pci_n < expected else _DROPPED_REMEDY
        return [
            CheckResult(
                CHECK_ID,
                None,
                Severity.CRITICAL,
                f"{counts}: {expected - nvml_n} card(s) missing",
                remedy,
            )
        ]
    if expected is not None and nvml_n > expected:
        return [
            CheckResult(
                CHECK_ID,
                None,
                Severity.WARNING,
                f"{counts}: {nvml_n - expected} more than expected",
                "set [rig] card_count to the number of cards installed",
            )
        ]
    if nvml_n == 0:
        return [
            CheckResult(
                CHECK_ID,
                None,
                Severity.WARNING,
                f"{counts}: no cards found",
                "check that the nvidia driver is loaded (lsmod | grep nvidia) "
                "and set [rig] card_count",
            )
        ]
    note = "" if pci_ids else " (sysfs not readable here: PCI bus not compared)"
    return [CheckResult(CHECK_ID, None, Severity.OK, f"{counts}{note}")]


SPEC = CheckSpec(
    id=CHECK_ID,
    run=check,
    text=CheckText(
        "cards missing",
        "NVML lists fewer cards than the PCI bus or [rig] card_count: a card fell off the bus "
        "(riser, power) or failed to initialise at boot. A pipeline-parallel engine on the "
        "missing card cannot start.",
        "reboot; if it recurs, reseat the riser and check the card's power cables.",
    ),
    alert=Alert("CardMissing", "Card missing"),
    gate=True,
)
