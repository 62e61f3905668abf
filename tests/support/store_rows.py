"""Store test rows: a healthy card, a poll of cards, times from one start (``T0``).

Shared by the store's tests and the daemon's that write through a real store.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from hwcheck.model import GpuSnapshot, RigSnapshot

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
UrlFactory = Callable[[], str]  # a new, empty store's URL


# -- rig snapshots --------------------------------------------------------------------


def card(index: int, **fields: object) -> GpuSnapshot:
    """A healthy card ``index`` with stable identity; ``fields`` override readings."""
    values: dict[str, object] = {
        "index": index,
        "pci_bus_id": f"0000:{index + 1:02x}:00.0",
        "uuid": f"GPU-test-{index}",
        "name": "NVIDIA CMP 170HX",
        "serial": f"SN{index:04d}",
        "memory_used_mib": 1000,
        "power_draw_w": 150.0,
        "power_limit_w": 180.0,
        "temperature_c": 60.0,
        "memory_temperature_c": 70.0,
        "sm_clock_mhz": 1400,
        "clock_event_reasons": 0,
        "pcie_gen_current": 2,
        "pcie_width_current": 4,
    }
    values.update(fields)
    return GpuSnapshot(**values)  # type: ignore[arg-type]


def poll(ts: datetime, *cards: GpuSnapshot) -> RigSnapshot:
    """One poll taken at ``ts``."""
    return RigSnapshot(taken_at=ts, monotonic_s=(ts - T0).total_seconds(), cards=tuple(cards))


def at(seconds: float) -> datetime:
    """``T0`` plus ``seconds``."""
    return T0 + timedelta(seconds=seconds)
