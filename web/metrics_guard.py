"""The traffic guard's series on ``/metrics`` (only when ``[guard]`` is configured).

Counters are totals since fleetd started, kept across guard restarts. The sign counters
carry the detector's name (``dsml_markup``, ``reasoning_in_content``, ``think_unclosed``,
``think_empty``, ``announced_no_call``, ``repeated_lines``); token counters carry the
client key's configured name, never the key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from serving.guard.counters import GUARD_COUNTERS
from web.metrics_model import GuardMetrics

# The fair queue's figures -> (metric name, help, counter or gauge).
QUEUE = {
    "depth": ("cmpfleet_guard_queue_depth", "Requests waiting in the fair queue now.", False),
    "running": ("cmpfleet_guard_queue_running", "Requests at the engine through the queue.", False),
    "waited": ("cmpfleet_guard_queue_waited", "Requests that waited for a slot.", True),
    "wait_s_total": (
        "cmpfleet_guard_queue_wait_seconds",
        "Seconds requests spent waiting in the fair queue, in total.",
        True,
    ),
    "wait_s_max": (
        "cmpfleet_guard_queue_wait_max_seconds",
        "The longest wait in the fair queue since the guard started.",
        False,
    ),
}


def guard_metrics(guard: GuardMetrics | None) -> Iterator[Metric]:
    """Every ``cmpfleet_guard_`` family (none when the guard is not configured)."""
    if guard is None:
        return
    yield GaugeMetricFamily(
        "cmpfleet_guard_up",
        "1 while the guard process answers fleetd.",
        value=1.0 if guard.up else 0.0,
    )
    yield CounterMetricFamily(
        "cmpfleet_guard_restarts",
        "Guard processes restarted after an exit.",
        value=float(guard.restarts),
    )
    for name, row in GUARD_COUNTERS.items():
        if row.metric is not None:
            yield CounterMetricFamily(
                row.metric, row.help, value=float(guard.counters.get(name, 0))
            )
    signs = CounterMetricFamily(
        "cmpfleet_guard_reply_signs",
        "Replies showing a sign of a sick engine (leaks and loops), by detector.",
        labels=["sign"],
    )
    for sign, count in sorted(guard.signs.items()):
        signs.add_metric([sign], float(count))
    yield signs
    tokens = CounterMetricFamily(
        "cmpfleet_guard_tokens",
        "Tokens the engine reported, by client key and kind.",
        labels=["key", "kind"],
    )
    for (key, kind), count in sorted(guard.tokens.items()):
        tokens.add_metric([key, kind], float(count))
    yield tokens
    repairs = CounterMetricFamily(
        "cmpfleet_guard_repairs",
        "Repairs the guard made to agent traffic ([guard.repair]), by client key and repair.",
        labels=["key", "repair"],
    )
    for (key, repair), count in sorted(guard.repairs.items()):
        repairs.add_metric([key, repair], float(count))
    yield repairs
    for figure, (metric, help_text, counter) in QUEUE.items():
        value = float(guard.queue.get(figure, 0))
        if counter:
            yield CounterMetricFamily(metric, help_text, value=value)
        else:
            yield GaugeMetricFamily(metric, help_text, value=value)
    yield GaugeMetricFamily(
        "cmpfleet_guard_sessions",
        "Agent sessions seen in the last hour.",
        value=float(guard.sessions),
    )
    deepest = GaugeMetricFamily(
        "cmpfleet_guard_session_depth_max_tokens",
        "The deepest context of the last hour's sessions, in prompt tokens.",
    )
    if guard.deepest_session_tokens is not None:
        deepest.add_metric([], float(guard.deepest_session_tokens))
    yield deepest


class GuardCollector(Collector):
    """The guard's families at each scrape, from fleetd's guard keeper (memory only)."""

    def __init__(self, guard: Callable[[], GuardMetrics]) -> None:
        self._guard = guard

    def collect(self) -> Iterator[Metric]:
        """Every ``cmpfleet_guard_`` family."""
        yield from guard_metrics(self._guard())
