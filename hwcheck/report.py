"""The per-card and whole-rig documents shared by ``fleetctl check`` and ``/api/v1/status``.

docs/reference.md "JSON documents" fixes the card keys (``index``, ``pci_bus_id``,
``uuid``, ``name``, ``memory_total_mib``, ``power_limit_w``, ``power_draw_w``,
``power_brake_active``, ``temperature_c``, ``pcie_gen``, ``pcie_width``,
``xid_since_boot``, ``state``); both producers build them here so they cannot drift apart.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from hwcheck.causes import card_tags, group_causes
from hwcheck.checks import card_states
from hwcheck.model import CheckResult, ClassifiedXid, GpuSnapshot, RigSnapshot
from hwcheck.readings import READINGS
from hwcheck.verdict import RigVerdict, judge


def xid_counts_by_card(snapshot: RigSnapshot, xids: Sequence[ClassifiedXid]) -> dict[int, int]:
    """How many Xids each card had, joined on the normalised PCI address."""
    by_address = {card.pci_bus_id: card.index for card in snapshot.cards}
    counts: Counter[int] = Counter()
    for item in xids:
        index = by_address.get(item.event.pci_bus_id or "")
        if index is not None:
            counts[index] += 1
    return dict(counts)


def xid_numbers_by_card(
    snapshot: RigSnapshot, xids: Sequence[ClassifiedXid]
) -> dict[int, list[int]]:
    """The Xid numbers each card had this boot, oldest first (for its ``Xid 31`` tag)."""
    by_address = {card.pci_bus_id: card.index for card in snapshot.cards}
    numbers: dict[int, list[int]] = {}
    for item in xids:
        index = by_address.get(item.event.pci_bus_id or "")
        if index is not None:
            numbers.setdefault(index, []).append(item.event.xid)
    return numbers


def reading_fields(card: GpuSnapshot) -> dict[str, Any]:
    """Each declared reading's API field (``hwcheck.readings``), as the document shows it.

    ``processes`` is the listing (None where the driver does not list them, ``[]`` when
    none run); every other reading is its value as NVML gave it.
    """
    shown: dict[str, Any] = {}
    for reading in READINGS:
        if reading.api_field is None:
            continue
        value = getattr(card, reading.name)
        if isinstance(value, tuple):
            value = [process.as_dict() for process in value]
        shown[reading.api_field] = value
    return shown


def card_document(
    card: GpuSnapshot, xid_since_boot: int, state: str, tags: Sequence[str] = ()
) -> dict[str, Any]:
    """One card as the documents' ``cards`` entry, with a few useful extras.

    ``tags``: its failing checks in short (``BRAKE``, ``BAR1``, ``Xid 31``), worst first:
    what a card row shows where a whole message does not fit (a phone, 80 columns).
    The readings are ``reading_fields``'; ``memory_used_pct`` is worked out here.
    """
    share = None
    if card.memory_used_mib is not None and card.memory_total_mib:
        share = round(100 * card.memory_used_mib / card.memory_total_mib, 1)
    return {
        "index": card.index,
        "pci_bus_id": card.pci_bus_id,
        "uuid": card.uuid,
        "name": card.name,
        "serial": card.serial,
        **reading_fields(card),
        "clock_event_reasons": card.clock_event_names,
        "pcie_gen_max": card.pcie_gen_max,
        "pcie_width_max": card.pcie_width_max,
        "persistence_mode": card.persistence_mode,
        "vbios_version": card.vbios_version,
        "xid_since_boot": xid_since_boot,
        "state": state,
        "tags": list(tags),
        "lost_reason": card.lost_reason,
        "memory_used_pct": share,
    }


def rig_document(
    snapshot: RigSnapshot,
    results: Sequence[CheckResult],
    xids: Sequence[ClassifiedXid],
    verdict: RigVerdict | None = None,
) -> dict[str, Any]:
    """``{overall, cards, checks}``: the part shared by ``check --json`` and the status API.

    ``overall`` is ``verdict``'s (fleetd's, with its latch and engine), else the results'.
    """
    counts = xid_counts_by_card(snapshot, xids)
    states = card_states(results)
    tags = card_tags(results, xid_numbers_by_card(snapshot, xids))
    return {
        "overall": (verdict or judge(results)).overall,
        "cards": [
            card_document(
                card,
                counts.get(card.index, 0),
                "lost" if card.lost else states.get(card.index, "ok"),
                tags.get(card.index, ["LOST"] if card.lost else []),
            )
            for card in snapshot.cards
        ],
        "checks": [result.as_dict() for result in results],
        "causes": [cause.as_dict() for cause in group_causes(results)],
    }
