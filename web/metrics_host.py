"""The host-truth part of ``/metrics``: the PCIe AER counters.

The cards' own host truth (BAR1, max clocks, PCIe replays) are card readings, declared
in ``hwcheck.readings`` and exported by ``web.metrics_cards``. Here, per device (cards
and the switch or root ports above them, label ``pci_bus_id``):
``cmpfleet_pcie_aer_errors_total`` by ``severity`` (``correctable``, ``nonfatal``,
``fatal``). Counters count since boot, so ``rate()`` over them is the climb
``pcie_errors`` judges. Unknown counts are left out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from hwcheck.hostfacts.model import DeviceAer


def host_families(devices: Sequence[DeviceAer]) -> Iterator[Metric]:
    """The AER counters of ``devices``."""
    aer = CounterMetricFamily(
        "cmpfleet_pcie_aer_errors",
        "PCIe AER errors since boot of a card or a port above it, by severity.",
        labels=["pci_bus_id", "severity"],
    )
    for device in devices:
        counts = device.counts
        for severity, value in (
            ("correctable", counts.correctable),
            ("nonfatal", counts.nonfatal),
            ("fatal", counts.fatal),
        ):
            if value is not None:
                aer.add_metric([device.pci_bus_id, severity], float(value))
    yield aer


class HostCollector(Collector):
    """The host's families at each scrape, from the host watch's last reading (memory only)."""

    def __init__(self, aer: Callable[[], Sequence[DeviceAer]]) -> None:
        self._aer = aer

    def collect(self) -> Iterator[Metric]:
        """The AER counters."""
        yield from host_families(self._aer())
