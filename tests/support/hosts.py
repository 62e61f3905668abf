"""Named builders for host facts and host baselines: a healthy patched rig unless told.

The healthy host is the one the issue's 8-card server documents: a patched kernel with the
bridge-window fix (64 GB BAR1 behind the switches), the kernel arguments it needs, the
patched nvidia module under a depmod override with its ``NVreg_RegistryDwords``, every
card bound to nvidia and P2P OK on every pair. Tests change only what they are about.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from hwcheck.hostfacts.baseline import CardBaseline, HostBaseline
from hwcheck.hostfacts.model import (
    AerCounts,
    BootEntry,
    CardBus,
    DeviceAer,
    HostFacts,
    P2pPair,
    P2pStatus,
    PcieCounterSample,
    PciLink,
    pair_key,
)
from tests.support.cards import bus_id

KERNEL = "6.8.12-cmp-bar1"
STOCK_KERNEL = "6.8.0-49-generic"
REQUIRED = ("pci=realloc,hpmemsize=64G", "iommu=pt", "modprobe.blacklist=nouveau")
CMDLINE = (f"BOOT_IMAGE=/vmlinuz-{KERNEL}", "root=UUID=1234", "ro", *REQUIRED, "quiet")
MODULE = f"/lib/modules/{KERNEL}/updates/dkms/nvidia.ko"
SRCVERSION = "5D1C0A3E9B7F42E6A1C8D2F"
REGISTRY = "RMForceP2PType=1;ForceP2P=17"


def switch_port(index: int) -> str:
    """The PLX downstream port above card ``index`` (two cards per switch)."""
    return f"0000:{index // 2 + 0x10:02x}:00.0"


def root_port(index: int) -> str:
    """The root port above the switch of card ``index``."""
    return f"0000:00:{index // 2 + 1:02x}.1"


def make_card_bus(index: int, **overrides: Any) -> CardBus:
    """Card ``index`` bound to nvidia behind a switch port, a Gen4 x16 uplink."""
    card = CardBus(
        pci_bus_id=bus_id(index),
        driver="nvidia",
        bridges=(switch_port(index), root_port(index)),
        uplink=PciLink(4, 16),
    )
    return replace(card, **overrides)


def make_host(count: int = 4, **overrides: Any) -> HostFacts:
    """A healthy patched host with ``count`` cards."""
    facts = HostFacts(
        running_kernel=KERNEL,
        cmdline=CMDLINE,
        default_boot=BootEntry(KERNEL, CMDLINE[1:], f"Linux {KERNEL}", "grub.cfg"),
        module_path=MODULE,
        module_srcversion=SRCVERSION,
        registry_dwords=REGISTRY,
        cards=tuple(make_card_bus(i) for i in range(count)),
        p2p=tuple(
            P2pPair(*pair_key(bus_id(a), bus_id(b)), P2pStatus.OK)
            for a, b in itertools.combinations(range(count), 2)
        ),
    )
    return replace(facts, **overrides)


def make_card_baseline(index: int, count: int = 4, **overrides: Any) -> CardBaseline:
    """What card ``index`` recorded on the healthy host."""
    values: dict[str, Any] = {
        "bar1_mib": 65536,
        "vbios": "92.00.6D.00.0A",
        "sm_clock_max_mhz": 1410,
        "memory_clock_max_mhz": 1728,
        "driver": "nvidia",
        "bridge": switch_port(index),
        "uplink_gen": 4,
        "uplink_width": 16,
        "p2p_ok": tuple(bus_id(i) for i in range(count) if i != index),
    }
    values.update(overrides)
    return CardBaseline(**values)


def make_baseline(
    count: int = 4, cards: dict[int, CardBaseline] | None = None, **overrides: Any
) -> HostBaseline:
    """The baseline recorded on the healthy host; ``cards`` replaces some cards' records."""
    chosen = {i: make_card_baseline(i, count) for i in range(count)}
    chosen.update(cards or {})
    values: dict[str, Any] = {
        "recorded_at": "2026-09-29T13:00:00+00:00",
        "kernel_release": KERNEL,
        "required_cmdline": REQUIRED,
        "module_path": MODULE,
        "module_srcversion": SRCVERSION,
        "registry_dwords": REGISTRY,
        "cards": {bus_id(i): card for i, card in chosen.items()},
    }
    values.update(overrides)
    return HostBaseline(**values)


def counters(
    *points: tuple[float, dict[int, int], dict[str, AerCounts]],
) -> Sequence[PcieCounterSample]:
    """Counter samples from ``(seconds, {card: replay}, {address: AER counts})`` points."""
    return tuple(
        PcieCounterSample(
            monotonic_s=at_s,
            replay=tuple((bus_id(card), count) for card, count in replay.items()),
            aer=tuple(DeviceAer(address, counts) for address, counts in aer.items()),
        )
        for at_s, replay, aer in points
    )
