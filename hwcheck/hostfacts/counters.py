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


def _ends(
    samples: Sequence[PcieCounterSample], value_of: Callable[[PcieCounterSample], int | None]
) -> list[tuple[float, int]]:
    """The first and the last ``(monotonic_s, value)`` read: all a rate uses.

    Scanned from each end, so a poll's check costs a few samples per counter, not the whole
    window's (a rate was once rebuilt from every held sample, per card and per counter, at
    every poll: the poll's costliest check).
    """
    first: tuple[int, float, int] | None = None
    for index, sample in enumerate(samples):
        if (value := value_of(sample)) is not None:
            first = (index, sample.monotonic_s, value)
            break
    if first is None:
        return []
    for index in range(len(samples) - 1, first[0], -1):
        sample = samples[index]
        if (value := value_of(sample)) is not None:
            return [(first[1], first[2]), (sample.monotonic_s, value)]
    return [(first[1], first[2])]


def replay_ends(samples: Sequence[PcieCounterSample], address: str) -> list[tuple[float, int]]:
    """A card's NVML replay counter: its first and last reading over the samples."""

    def value_of(sample: PcieCounterSample) -> int | None:
        return next((count for found, count in sample.replay if found == address), None)

    return _ends(samples, value_of)


def aer_ends(
    samples: Sequence[PcieCounterSample], address: str, field: Callable[[AerCounts], int | None]
) -> list[tuple[float, int]]:
    """One AER counter of one device: its first and last reading over the samples."""

    def value_of(sample: PcieCounterSample) -> int | None:
        for device in sample.aer:
            if device.pci_bus_id == address and (value := field(device.counts)) is not None:
                return value
        return None

    return _ends(samples, value_of)


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
