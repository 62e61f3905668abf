"""The host facts as the status document and ``check --json`` show them.

One ``host`` section (boot chain, module, P2P, the baseline in force) and, per card, its
bus facts (driver, bridges, uplink, AER counters) beside the NVML readings. Built here so
fleetd's status and the one-shot check cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from hwcheck.hostfacts.baseline import HostBaseline, baseline_table
from hwcheck.hostfacts.model import HostFacts


def facts_document(facts: HostFacts) -> dict[str, Any]:
    """The rig-wide facts read (arguments as one line each, P2P as ``{a, b, status}``)."""
    boot = facts.default_boot
    return {
        "running_kernel": facts.running_kernel,
        "cmdline": None if facts.cmdline is None else " ".join(facts.cmdline),
        "default_boot": None
        if boot is None
        else {
            "kernel": boot.kernel,
            "title": boot.title,
            "source": boot.source,
            "args": None if boot.args is None else " ".join(boot.args),
        },
        "module_path": facts.module_path,
        "module_srcversion": facts.module_srcversion,
        "registry_dwords": facts.registry_dwords,
        "p2p": [{"a": p.a, "b": p.b, "status": p.status.value} for p in facts.p2p],
    }


def host_document(
    facts: HostFacts | None, baseline: HostBaseline, tensor_parallel_size: int
) -> dict[str, Any]:
    """The ``host`` section: what was read, what it is judged against, and the TP size."""
    recorded = baseline_table(baseline)
    recorded["pcie_errors_warn_per_min"] = baseline.pcie_errors_warn_per_min
    return {
        "facts": None if facts is None else facts_document(facts),
        "baseline": recorded if baseline.recorded else None,
        "tensor_parallel_size": tensor_parallel_size,
    }


def card_bus_fields(facts: HostFacts | None, pci_bus_id: str) -> dict[str, Any]:
    """One card's driver, bridges, uplink and AER counters (None: not read)."""
    bus = None if facts is None else facts.card(pci_bus_id)
    counts = None
    if facts is not None:
        counts = next((d.counts for d in facts.aer if d.pci_bus_id == pci_bus_id), None)
    return {
        "driver": None if bus is None else bus.driver,
        "bridges": None if bus is None else list(bus.bridges),
        "uplink_gen": None if bus is None or bus.uplink is None else bus.uplink.gen,
        "uplink_width": None if bus is None or bus.uplink is None else bus.uplink.width,
        "aer": None if counts is None else asdict(counts),
    }


def add_card_bus_fields(cards: Iterable[dict[str, Any]], facts: HostFacts | None) -> None:
    """Each card document gets its bus fields (``card_bus_fields``)."""
    for card in cards:
        card.update(card_bus_fields(facts, str(card.get("pci_bus_id"))))
