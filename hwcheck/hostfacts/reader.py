"""Read every host fact of one machine at once: the readers of this package put together.

``read_host_facts`` takes the root (``/`` on a rig, a recorded tree in tests), the cards'
PCI addresses (from NVML's snapshot), the P2P reader (NVML's, through the gateway) and
grubby's answer (None where there is no grubby), so nothing here starts a process or
touches NVML on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from hwcheck.hostfacts import module, pcitree
from hwcheck.hostfacts.bootloader import default_boot_entry
from hwcheck.hostfacts.cmdline import split_cmdline
from hwcheck.hostfacts.model import HostFacts, P2pPair
from hwcheck.textfile import read_text

P2pReader = Callable[[], tuple[P2pPair, ...]]


def running_kernel(root: Path) -> str | None:
    """``uname -r`` of the running kernel, from ``/proc/sys/kernel/osrelease``."""
    text = read_text(root / "proc" / "sys" / "kernel" / "osrelease")
    return (text or "").strip() or None


def kernel_cmdline(root: Path) -> tuple[str, ...] | None:
    """The running kernel's arguments (``/proc/cmdline``); None when unreadable."""
    text = read_text(root / "proc" / "cmdline")
    return None if text is None else split_cmdline(text)


def read_host_facts(
    root: Path,
    card_addresses: Sequence[str],
    *,
    p2p: P2pReader | None = None,
    grubby_info: str | None = None,
) -> HostFacts:
    """Everything this package reads about the host, for the cards at ``card_addresses``."""
    release = running_kernel(root)
    cards = tuple(pcitree.card_bus(root, address) for address in card_addresses)
    return HostFacts(
        running_kernel=release,
        cmdline=kernel_cmdline(root),
        default_boot=default_boot_entry(root, grubby_info),
        module_path=module.module_path(root, release),
        module_srcversion=module.module_srcversion(root),
        registry_dwords=module.registry_dwords(root),
        cards=cards,
        aer=pcitree.read_aer_counters(root, cards),
        p2p=() if p2p is None else p2p(),
    )
