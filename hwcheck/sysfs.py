"""Find NVIDIA devices on the PCI bus through sysfs, independently of NVML.

Why: NVML only lists the cards the driver still talks to. A card that dropped off NVML
(GPU lost, failed init) is still on the PCI bus, so comparing the two counts is how the
``card_count`` check tells "a card fell off NVML" from "a card is gone from the bus".
Everything takes ``sys_root`` so tests point it at recorded trees.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from hwcheck.model import (
    CMP170HX_DEVICE_IDS,
    NVIDIA_VENDOR_ID,
    PciDevice,
    normalize_pci_bus_id,
)

_LOG = logging.getLogger(__name__)

# PCI base class 0x03: display controllers (0x0300 VGA, 0x0302 3D controller).
_DISPLAY_BASE_CLASS = 0x03


@dataclass(frozen=True, slots=True)
class _SysfsEntry:
    """One PCI function as read from sysfs (``class_code`` is the 24-bit class)."""

    device: PciDevice
    class_code: int | None


def _read_hex(path: Path) -> int:
    """Read a sysfs hex attribute such as ``0x10de``; ValueError/OSError on bad ones."""
    return int(path.read_text(encoding="ascii").strip(), 16)


def _read_entry(dev_dir: Path) -> _SysfsEntry | None:
    """Read one ``bus/pci/devices/<bdf>`` entry; None (and a logged warning) if unreadable."""
    try:
        bus_id = normalize_pci_bus_id(dev_dir.name)
        vendor_id = _read_hex(dev_dir / "vendor")
        device_id = _read_hex(dev_dir / "device")
    except (OSError, ValueError) as exc:
        _LOG.warning("skipping PCI device %s: %s", dev_dir, exc)
        return None
    try:
        class_code: int | None = _read_hex(dev_dir / "class")
    except (OSError, ValueError):
        class_code = None  # only scan_nvidia_devices needs it; it treats None as unknown
    return _SysfsEntry(PciDevice(bus_id, vendor_id, device_id), class_code)


def _scan(sys_root: Path) -> list[_SysfsEntry]:
    """Every readable PCI function under ``<sys_root>/bus/pci/devices``, by bus id."""
    devices_dir = sys_root / "bus" / "pci" / "devices"
    try:
        dev_dirs = sorted(devices_dir.iterdir())
    except FileNotFoundError:
        return []  # no sysfs here (container, other OS): nothing to report
    except OSError as exc:
        _LOG.warning("cannot list %s: %s", devices_dir, exc)
        return []
    entries = [entry for d in dev_dirs if (entry := _read_entry(d)) is not None]
    return sorted(entries, key=lambda e: e.device.pci_bus_id)


def scan_cmp_devices(sys_root: Path = Path("/sys")) -> list[PciDevice]:
    """CMP 170HX devices (10de:20c2, 10de:2082) on the PCI bus, sorted by bus id."""
    return [
        e.device
        for e in _scan(sys_root)
        if e.device.vendor_id == NVIDIA_VENDOR_ID and e.device.device_id in CMP170HX_DEVICE_IDS
    ]


def scan_nvidia_devices(sys_root: Path = Path("/sys")) -> list[PciDevice]:
    """Every NVIDIA display-class device (class 0x03xxxx), CMP or not, for diagnostics.

    An NVIDIA device whose class file is unreadable is left out: its audio or USB
    functions share the vendor id and must not count as GPUs.
    """
    return [
        e.device
        for e in _scan(sys_root)
        if e.device.vendor_id == NVIDIA_VENDOR_ID
        and e.class_code is not None
        and e.class_code >> 16 == _DISPLAY_BASE_CLASS
    ]
