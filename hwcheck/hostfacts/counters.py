"""Rates of PCIe error counters: how fast a counter climbed over the samples held.

The counters (NVML's replay counter, sysfs AER totals) count since boot, so their value
says little; the climb does. A drop (the counter was reset: a reboot, a driver reload)
gives no rate rather than a negative one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hwcheck.hostfacts.model import AerCounts, DeviceAer, PcieCounterSample


@dataclass(frozen=True, slots=True)
class CounterRate:
    """A counter's climb between its first and last known value."""

    delta: int
    span_s: float
    latest: int

    @property
    def per_min(self) -> float:
        """The climb as a rate per minute."""
        return self.delta * 60.0 / self.span_s


def counter_rate(points: Sequence[tuple[float, int]]) -> CounterRate | None:
    """The climb over ``(monotonic_s, value)`` points, oldest first (None: fewer than two)."""
    if len(points) < 2:
        return None
    (first_s, first), (last_s, last) = points[0], points[-1]
    span_s = last_s - first_s
    if span_s <= 0 or last < first:
        return None
    return CounterRate(delta=last - first, span_s=span_s, latest=last)


def replay_points(samples: Sequence[PcieCounterSample], address: str) -> list[tuple[float, int]]:
    """A card's NVML replay counter over the samples that read it."""
    points: list[tuple[float, int]] = []
    for sample in samples:
        value = dict(sample.replay).get(address)
        if value is not None:
            points.append((sample.monotonic_s, value))
    return points


def aer_points(
    samples: Sequence[PcieCounterSample], address: str, field: Callable[[AerCounts], int | None]
) -> list[tuple[float, int]]:
    """One AER counter of one device over the samples that read it."""
    points: list[tuple[float, int]] = []
    for sample in samples:
        for device in sample.aer:
            if device.pci_bus_id == address and (value := field(device.counts)) is not None:
                points.append((sample.monotonic_s, value))
    return points


def latest_aer(samples: Sequence[PcieCounterSample], address: str) -> AerCounts | None:
    """The newest AER counters read for a device."""
    for sample in reversed(samples):
        for device in sample.aer:
            if device.pci_bus_id == address:
                return device.counts
    return None


def counter_sample(
    monotonic_s: float,
    replay: Sequence[tuple[str, int | None]],
    aer: Sequence[DeviceAer] = (),
) -> PcieCounterSample:
    """A sample from the cards' replay counters (unknown ones left out) and AER counters."""
    known = tuple((address, count) for address, count in replay if count is not None)
    return PcieCounterSample(monotonic_s=monotonic_s, replay=known, aer=tuple(aer))
