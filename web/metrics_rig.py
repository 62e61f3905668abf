"""The rig's own part of ``/metrics``: check verdicts, the rig's verdict, the poll loop.

``cmpfleet_check_status{check}``, ``cmpfleet_rig_status``, the kernel-log follower, the
polls counter, the last poll's age and the poll timer ``cmpfleet_poll_duration_seconds``:
prometheus_client's own ``Histogram``, which the poll job observes. It is not registered
by itself: ``PollDurationCollector`` exports its buckets, sum and count, leaving out the
``_created`` sample the library adds (the series are what they were before the library
kept the buckets, and a timestamp of fleetd's start is no reading of the rig).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from web.metrics_model import RigState
from web.version import build_info

POLL_DURATION_NAME = "cmpfleet_poll_duration_seconds"
POLL_DURATION_HELP = "Time one poll of the cards and their checks took."
# A healthy NVML poll of 4-8 cards takes tens of milliseconds; a sick card can block NVML
# for seconds (the call timeout bounds it), so the buckets span both.
POLL_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def poll_duration_histogram() -> Histogram:
    """A fresh, unregistered poll timer (one per daemon: no process-wide registry)."""
    return Histogram(POLL_DURATION_NAME, POLL_DURATION_HELP, buckets=POLL_BUCKETS_S, registry=None)


class PollDurationCollector(Collector):
    """``cmpfleet_poll_duration_seconds`` from the poll job's ``Histogram``."""

    def __init__(self, histogram: Histogram) -> None:
        self._histogram = histogram

    def collect(self) -> Iterator[Metric]:
        """The histogram's family without its ``_created`` sample."""
        for metric in self._histogram.collect():
            metric.samples = [s for s in metric.samples if not s.name.endswith("_created")]
            yield metric


def rig_families(state: RigState) -> Iterator[Metric]:
    """Checks, the rig's verdict, the follower and the poll loop's counters."""
    checks = GaugeMetricFamily(
        "cmpfleet_check_status",
        "Worst result of each check: 0 ok, 1 warning, 2 critical.",
        labels=["check"],
    )
    for check_id, severity in sorted(state.check_severities.items()):
        checks.add_metric([check_id], float(severity.rank))
    yield checks
    overall = GaugeMetricFamily(
        "cmpfleet_rig_status",
        "The rig's verdict (as fleetctl status): 0 ok, 1 warning, 2 critical, 3 unknown.",
    )
    if state.rig_status is not None:
        overall.add_metric([], float(state.rig_status))
    yield overall
    yield GaugeMetricFamily(
        "cmpfleet_kernel_log_follower_up",
        "1 while the kernel-log follower reads (Xids are seen).",
        value=1.0 if state.kernel_log_follower_up else 0.0,
    )
    yield CounterMetricFamily(
        "cmpfleet_polls", "Polls completed since fleetd started.", value=float(state.polls)
    )
    age = GaugeMetricFamily(
        "cmpfleet_last_poll_age_seconds", "Seconds since the last complete poll."
    )
    if state.last_poll_age_s is not None:
        age.add_metric([], state.last_poll_age_s)
    yield age


class RigCollector(Collector):
    """The rig's own families at each scrape, from the rig wing's picture (memory only)."""

    def __init__(self, state: Callable[[], RigState]) -> None:
        self._state = state

    def collect(self) -> Iterator[Metric]:
        """Every family of ``rig_families``, from one consistent ``RigState``."""
        yield from rig_families(self._state())


class BuildInfoCollector(Collector):
    """``cmpfleet_build_info{version, python, python_implementation} 1``."""

    def collect(self) -> Iterator[Metric]:
        """The one info family."""
        facts = build_info()
        family = GaugeMetricFamily(
            "cmpfleet_build_info", "The cmpfleet version serving, always 1.", labels=list(facts)
        )
        family.add_metric(list(facts.values()), 1.0)
        yield family
