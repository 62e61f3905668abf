"""Recovery's part of ``/metrics``: the reboot-required latch and the drain.

``cmpfleet_reboot_required`` (1 while the latch is set: the rig needs a person and a
reboot) and ``cmpfleet_drain_active`` (1 while the rig drains and its guard answers 503).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


class RecoveryCollector(Collector):
    """The latch and the drain at each scrape, read from their holders (memory only)."""

    def __init__(self, reboot_required: Callable[[], bool], draining: Callable[[], bool]) -> None:
        self._reboot_required = reboot_required
        self._draining = draining

    def collect(self) -> Iterator[Metric]:
        """The two flags."""
        yield GaugeMetricFamily(
            "cmpfleet_reboot_required",
            "1 while the reboot-required latch is set.",
            value=1.0 if self._reboot_required() else 0.0,
        )
        yield GaugeMetricFamily(
            "cmpfleet_drain_active",
            "1 while the rig drains (its guard answers 503 draining; fleetctl undrain ends it).",
            value=1.0 if self._draining() else 0.0,
        )
