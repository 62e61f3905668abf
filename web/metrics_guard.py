"""The traffic guard's series on ``/metrics`` (only when ``[guard]`` is configured).

Counters are totals since fleetd started, kept across guard restarts. The sign counters
carry the detector's name (``dsml_markup``, ``reasoning_in_content``, ``think_unclosed``,
``think_empty``, ``announced_no_call``, ``repeated_lines``); token counters carry the
client key's configured name, never the key.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from web.metrics_model import GuardMetrics

# Guard counter -> (metric name, help). Each is a plain counter without labels.
COUNTERS = {
    "requests": ("cmpfleet_guard_requests", "Requests the guard received."),
    "unauthorized": ("cmpfleet_guard_unauthorized", "Requests refused for a missing or wrong key."),
    "pinned": ("cmpfleet_guard_pinned_requests", "Requests the guard set a pinned field on."),
    "mirrored": ("cmpfleet_guard_mirrored_replies", "Replies whose reasoning field was mirrored."),
    "cap_refused": ("cmpfleet_guard_context_refused", "Requests refused over max_context_tokens."),
    "cap_warned": ("cmpfleet_guard_context_warned", "Requests over the cap, flagged (warn mode)."),
    "engine_unavailable": (
        "cmpfleet_guard_engine_unavailable",
        "Requests answered 503 because the engine did not answer.",
    ),
    "streams_lost": (
        "cmpfleet_guard_streams_lost",
        "Streamed replies the engine broke off (ended with an error event).",
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
    for name, (metric, help_text) in COUNTERS.items():
        yield CounterMetricFamily(metric, help_text, value=float(guard.counters.get(name, 0)))
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
