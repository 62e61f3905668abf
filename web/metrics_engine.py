"""The engine's own figures on ``/metrics``, under cmpfleet's names.

What fleetd reads of the engine's vLLM metrics (``serving.runtime.engine_metrics``),
re-exported so one scrape of fleetd has the rig and its engine: time to first token and
inter-token latency p50/p95 over the window (seconds), speculative decoding's acceptance
ratio and mean accepted length, the prefix cache's hit ratio, requests running and
waiting, KV-cache use (a ratio) and preemptions since the engine started (a counter: it
starts over with the engine, which ``rate()`` handles). Unknown figures are left out.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from web.metrics_model import RigMetrics

GAUGES: tuple[tuple[str, str, str, float], ...] = (
    ("cmpfleet_engine_ttft_p50_seconds", "Engine time to first token, median over the window.",
     "ttft_p50_s", 1.0),
    ("cmpfleet_engine_ttft_p95_seconds", "Engine time to first token, p95 over the window.",
     "ttft_p95_s", 1.0),
    ("cmpfleet_engine_inter_token_latency_p50_seconds",
     "Engine inter-token latency, median over the window.", "itl_p50_s", 1.0),
    ("cmpfleet_engine_inter_token_latency_p95_seconds",
     "Engine inter-token latency, p95 over the window.", "itl_p95_s", 1.0),
    ("cmpfleet_engine_spec_decode_acceptance_ratio",
     "Share of speculative draft tokens the engine accepted over the window.",
     "spec_acceptance_ratio", 1.0),
    ("cmpfleet_engine_spec_decode_mean_accepted_tokens",
     "Tokens per speculative step over the window (accepted drafts plus the bonus token).",
     "spec_mean_accepted_tokens", 1.0),
    ("cmpfleet_engine_prefix_cache_hit_ratio",
     "Share of prompt tokens the engine's prefix cache served over the window.",
     "prefix_cache_hit_ratio", 1.0),
    ("cmpfleet_engine_requests_running", "Requests the engine runs now.", "requests_running", 1.0),
    ("cmpfleet_engine_requests_waiting", "Requests waiting in the engine's queue.",
     "requests_waiting", 1.0),
    ("cmpfleet_engine_kv_cache_usage_ratio", "Share of the engine's KV cache in use.",
     "kv_cache_usage_pct", 0.01),
)  # fmt: skip


def engine_metrics(state: RigMetrics) -> Iterator[Metric]:
    """The engine's figure families (each present, empty when the engine says nothing)."""
    figures = state.engine_figures
    for name, help_text, key, scale in GAUGES:
        family = GaugeMetricFamily(name, help_text)
        value = figures.get(key)
        if value is not None:
            family.add_metric([], float(value) * scale)
        yield family
    preemptions = CounterMetricFamily(
        "cmpfleet_engine_preemptions", "Requests the engine preempted since it started."
    )
    value = figures.get("preemptions_total")
    if value is not None:
        preemptions.add_metric([], float(value))
    yield preemptions
