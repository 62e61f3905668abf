"""The crash black box's series on ``/metrics``: bundles kept, by class and verdict.

``cmpfleet_crashes{class, verdict}``: the bundles fleetd keeps now (``[evidence]``
bounds them, oldest pruned first), by the classifier's crash class (or the fault that
made the bundle: ``illegal_memory_access``, ``xid79``, ...) and the triage rule that
judged it (``unknown`` when none fitted), the same verdict ``fleetctl crashes`` shows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


def crash_metrics(crashes: Mapping[tuple[str, str], int]) -> GaugeMetricFamily:
    """``cmpfleet_crashes``, one series per (class, verdict) with a bundle."""
    family = GaugeMetricFamily(
        "cmpfleet_crashes",
        "Crash bundles kept, by crash class and triage verdict.",
        labels=["class", "verdict"],
    )
    for (crash_class, verdict), count in sorted(crashes.items()):
        family.add_metric([crash_class, verdict], float(count))
    return family


class CrashesCollector(Collector):
    """``cmpfleet_crashes`` at each scrape, from the evidence keeper's counts (memory only)."""

    def __init__(self, crashes: Callable[[], Mapping[tuple[str, str], int]]) -> None:
        self._crashes = crashes

    def collect(self) -> Iterator[Metric]:
        """The one family."""
        yield crash_metrics(self._crashes())
