"""The host facts a CMP rig depends on, as plain frozen data.

Read from files (``/proc``, ``/sys``, the bootloader's) and from NVML's P2P status, once a
minute by fleetd and once by ``fleetctl check``; judged against the baseline ``fleetctl
init`` records. ``None`` always means "could not be read here" (a container without
``/boot``, a driver that does not say), never "empty": the checks say so instead of
guessing. PCI addresses are the normalised ``dddd:bb:dd.f`` everywhere.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class P2pStatus(enum.StrEnum):
    """NVML's peer-to-peer read status of a card pair (``nvmlGpuP2PStatus_t``), as words."""

    OK = "ok"
    CHIPSET_NOT_SUPPORTED = "chipset_not_supported"
    GPU_NOT_SUPPORTED = "gpu_not_supported"
    TOPOLOGY_NOT_SUPPORTED = "topology_not_supported"
    DISABLED_BY_REGKEY = "disabled_by_regkey"
    NOT_SUPPORTED = "not_supported"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class P2pPair:
    """The P2P read status between two cards (``a`` < ``b`` by PCI address)."""

    a: str
    b: str
    status: P2pStatus


def pair_key(a: str, b: str) -> tuple[str, str]:
    """The one order a pair is kept in (by PCI address), whichever card asked."""
    return (a, b) if a <= b else (b, a)


@dataclass(frozen=True, slots=True)
class AerCounts:
    """A device's PCIe AER counters since boot (``aer_dev_*`` in sysfs); None: no AER there."""

    correctable: int | None = None
    nonfatal: int | None = None
    fatal: int | None = None


@dataclass(frozen=True, slots=True)
class DeviceAer:
    """One device's AER counters: a card, or a bridge (switch port, root port) above one."""

    pci_bus_id: str
    counts: AerCounts


@dataclass(frozen=True, slots=True)
class PciLink:
    """A PCIe link as sysfs reports it (``current_link_speed``/``current_link_width``)."""

    gen: int | None
    width: int | None

    def text(self) -> str:
        """``Gen4 x16`` (``?`` for a part not known)."""
        gen = "?" if self.gen is None else str(self.gen)
        width = "?" if self.width is None else str(self.width)
        return f"Gen{gen} x{width}"


@dataclass(frozen=True, slots=True)
class CardBus:
    """What sysfs says about one card: its bound driver and the bridges above it.

    ``bridges`` run from the card's parent (a PLX switch's downstream port, or the root
    port itself) up to the root port. ``uplink`` is the root port's link: the switch's
    uplink when a switch sits between, the card's own link otherwise.
    """

    pci_bus_id: str
    driver: str | None  # "nvidia"; None: no driver bound to the card
    bridges: tuple[str, ...] = ()
    uplink: PciLink | None = None

    @property
    def bridge(self) -> str | None:
        """The parent bridge (None when the card hangs off the root complex directly)."""
        return self.bridges[0] if self.bridges else None


@dataclass(frozen=True, slots=True)
class BootEntry:
    """The entry the bootloader boots next: its kernel release and arguments."""

    kernel: str | None
    args: tuple[str, ...] | None
    title: str | None = None
    source: str = "unknown"  # grubby, bls, grub.cfg


@dataclass(frozen=True, slots=True)
class HostFacts:
    """Everything read about the host at one moment (None: not readable here)."""

    running_kernel: str | None = None
    cmdline: tuple[str, ...] | None = None
    default_boot: BootEntry | None = None
    module_path: str | None = None
    module_srcversion: str | None = None
    registry_dwords: str | None = None
    cards: tuple[CardBus, ...] = ()
    aer: tuple[DeviceAer, ...] = ()
    p2p: tuple[P2pPair, ...] = ()

    def card(self, pci_bus_id: str) -> CardBus | None:
        """The sysfs facts of the card at ``pci_bus_id``, if read."""
        return next((c for c in self.cards if c.pci_bus_id == pci_bus_id), None)

    def p2p_status(self, a: str, b: str) -> P2pStatus | None:
        """The P2P read status between two cards, if read."""
        key = pair_key(a, b)
        return next((p.status for p in self.p2p if (p.a, p.b) == key), None)


@dataclass(frozen=True, slots=True)
class PcieCounterSample:
    """PCIe error counters at one moment: NVML replay per card, AER per device.

    ``replay`` is ``(card PCI address, count)``; ``aer`` holds cards and their bridges.
    Either may be empty when not read at that moment (AER is read once a minute).
    """

    monotonic_s: float
    replay: tuple[tuple[str, int], ...] = ()
    aer: tuple[DeviceAer, ...] = ()
