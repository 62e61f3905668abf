"""A card's place on the PCI bus, from sysfs: bound driver, bridges above it, AER counters.

``/sys/bus/pci/devices/<addr>`` is a link into ``/sys/devices/pci0000:00/<root port>/
<switch upstream port>/<switch downstream port>/<card>``: the PCI addresses on that path
are the bridges between the card and the CPU (PLX switches on the big CMP servers, a
plain root port on a riser board). Riser links at Gen1/Gen2 x4 are where link errors
live, and a switch port shared by four cards shows its errors once for all of them, so
the AER counters are read for the card and for every bridge above it.

Everything takes ``root`` (``/``), so tests point it at a recorded tree with real links.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from hwcheck.hostfacts.model import AerCounts, CardBus, DeviceAer, PciLink
from hwcheck.model import normalize_pci_bus_id
from hwcheck.textfile import read_text

_PCI_ADDRESS = re.compile(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
# ``current_link_speed``: "5.0 GT/s PCIe" (newer kernels), "5 GT/s" or "5.0 GT/s" (older).
_SPEED_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
_AER_FILES = {
    "correctable": ("aer_dev_correctable", "TOTAL_ERR_COR"),
    "nonfatal": ("aer_dev_nonfatal", "TOTAL_ERR_NONFATAL"),
    "fatal": ("aer_dev_fatal", "TOTAL_ERR_FATAL"),
}


def _device_dir(root: Path, pci_bus_id: str) -> Path:
    return root / "sys" / "bus" / "pci" / "devices" / pci_bus_id


def bound_driver(root: Path, pci_bus_id: str) -> str | None:
    """The driver bound to the device (``nvidia``, ``nouveau``, ``vfio-pci``); None: none."""
    try:
        target = os.readlink(_device_dir(root, pci_bus_id) / "driver")
    except OSError:
        return None
    return target.rstrip("/").rsplit("/", 1)[-1] or None


def bridges_above(root: Path, pci_bus_id: str) -> tuple[str, ...]:
    """The bridges between the card and the CPU, parent first, root port last."""
    try:
        real = Path(os.path.realpath(_device_dir(root, pci_bus_id)))
    except OSError:
        return ()
    addresses = [part for part in real.parts if _PCI_ADDRESS.match(part)]
    if not addresses or normalize_pci_bus_id(addresses[-1]) != pci_bus_id:
        return ()  # not a link into /sys/devices (an odd tree): no topology known
    return tuple(normalize_pci_bus_id(a) for a in reversed(addresses[:-1]))


def parse_link_speed(text: str) -> int | None:
    """The PCIe generation of a ``current_link_speed`` value (None: unknown speed)."""
    found = re.match(r"\s*([0-9.]+)\s*GT/s", text)
    if found is None:
        return None
    return _SPEED_GEN.get(float(found.group(1)))


def read_link(root: Path, pci_bus_id: str) -> PciLink | None:
    """A device's current link (None when sysfs has no link attributes for it)."""
    folder = _device_dir(root, pci_bus_id)
    speed = read_text(folder / "current_link_speed")
    width = read_text(folder / "current_link_width")
    if speed is None and width is None:
        return None
    gen = None if speed is None else parse_link_speed(speed)
    lanes = None if width is None or not width.strip().isdecimal() else int(width.strip())
    return PciLink(gen=gen, width=lanes)


def card_bus(root: Path, pci_bus_id: str) -> CardBus:
    """The card's driver, the bridges above it and the root port's link."""
    bridges = bridges_above(root, pci_bus_id)
    uplink = read_link(root, bridges[-1]) if bridges else None
    return CardBus(
        pci_bus_id=pci_bus_id,
        driver=bound_driver(root, pci_bus_id),
        bridges=bridges,
        uplink=uplink,
    )


def parse_aer_file(text: str, total_key: str) -> int | None:
    """The total of an ``aer_dev_*`` file: its ``TOTAL_ERR_*`` line, else the sum of the rest."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdecimal():
            counts[parts[0]] = int(parts[1])
    if total_key in counts:
        return counts[total_key]
    return sum(counts.values()) if counts else None


def read_aer(root: Path, pci_bus_id: str) -> AerCounts | None:
    """The device's AER counters since boot (None when it has no AER capability)."""
    folder = _device_dir(root, pci_bus_id)
    values: dict[str, int | None] = {}
    for name, (filename, total_key) in _AER_FILES.items():
        text = read_text(folder / filename)
        values[name] = None if text is None else parse_aer_file(text, total_key)
    if all(value is None for value in values.values()):
        return None
    return AerCounts(**values)


def read_aer_counters(root: Path, cards: Iterable[CardBus]) -> tuple[DeviceAer, ...]:
    """AER counters of each card and each bridge above one, every device once."""
    seen: set[str] = set()
    found: list[DeviceAer] = []
    for card in cards:
        for address in (card.pci_bus_id, *card.bridges):
            if address in seen:
                continue
            seen.add(address)
            counts = read_aer(root, address)
            if counts is not None:
                found.append(DeviceAer(address, counts))
    return tuple(found)
