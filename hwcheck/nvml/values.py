"""Turn the raw values NVML hands back into the units and shapes of ``GpuSnapshot``.

Pure functions, no NVML: strings come back as ``bytes`` from older modules and ``str`` from
newer, power in milliwatts, memory in bytes.
"""

from __future__ import annotations

import logging
from typing import Any

from hwcheck.model import normalize_pci_bus_id

logger = logging.getLogger(__name__)

MIB = 1024 * 1024


def text(value: Any) -> str | None:
    """An NVML string as ``str``, without padding NULs; None when empty or missing."""
    if value is None:
        return None
    if isinstance(value, bytes | bytearray):
        value = bytes(value).decode("utf-8", errors="replace")
    return str(value).strip().strip("\x00") or None


def bus_id(raw: str | None) -> str | None:
    """The PCI bus id in the one form the rest of cmpfleet compares (``0000:01:00.0``)."""
    if raw is None:
        return None
    try:
        return normalize_pci_bus_id(raw)
    except ValueError:
        logger.warning("NVML returned a PCI bus id that is not an address: %r", raw)
        return raw.lower()


def watts(milliwatts: Any) -> float | None:
    """NVML's milliwatts as watts."""
    return None if milliwatts is None else int(milliwatts) / 1000.0


def mib(size_bytes: Any) -> int:
    """Bytes as whole MiB."""
    return int(size_bytes) // MIB


def optional_int(value: Any) -> int | None:
    """An NVML number as ``int``, keeping None (not available)."""
    return None if value is None else int(value)


def optional_float(value: Any) -> float | None:
    """An NVML number as ``float``, keeping None (not available)."""
    return None if value is None else float(value)
