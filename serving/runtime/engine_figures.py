"""The engine's figures fleetd keeps and exports, declared once: key, store, metric.

A figure is a key of ``EngineMetrics.as_dict()`` (the load: requests running and
waiting, KV-cache use; or one of ``EngineFigures``'s fields). Its row here says whether
each engine sample keeps it (``stored``: the ``engine_samples`` column of the same name,
which ``daemon.store.samples`` reads and writes from ``STORED_FIGURES``) and how
``/metrics`` exports it (``metric``: its ``cmpfleet_engine_*`` family, scaled to the base
unit; ``web.metrics_engine`` iterates the rows). So a new figure is its field on
``EngineFigures``, its row here and, when stored, its migration.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class FigureKind(enum.StrEnum):
    """Prometheus' type of a figure's family."""

    GAUGE = "gauge"
    COUNTER = "counter"


@dataclass(frozen=True, slots=True)
class FigureMetric:
    """A figure's family on ``/metrics``: ``value * scale`` (unknown figures are left out)."""

    name: str
    help: str
    scale: float = 1.0
    kind: FigureKind = FigureKind.GAUGE


@dataclass(frozen=True, slots=True)
class EngineFigure:
    """One figure: where each engine sample keeps it, and its ``/metrics`` family."""

    key: str
    stored: bool = False
    metric: FigureMetric | None = None


FIGURES: tuple[EngineFigure, ...] = (
    EngineFigure("ttft_p50_s", True, FigureMetric(
        "cmpfleet_engine_ttft_p50_seconds", "Engine time to first token, median over the window.")),
    EngineFigure("ttft_p95_s", True, FigureMetric(
        "cmpfleet_engine_ttft_p95_seconds", "Engine time to first token, p95 over the window.")),
    EngineFigure("itl_p50_s", True, FigureMetric(
        "cmpfleet_engine_inter_token_latency_p50_seconds",
        "Engine inter-token latency, median over the window.")),
    EngineFigure("itl_p95_s", True, FigureMetric(
        "cmpfleet_engine_inter_token_latency_p95_seconds",
        "Engine inter-token latency, p95 over the window.")),
    EngineFigure("spec_acceptance_ratio", True, FigureMetric(
        "cmpfleet_engine_spec_decode_acceptance_ratio",
        "Share of speculative draft tokens the engine accepted over the window.")),
    EngineFigure("spec_mean_accepted_tokens", True, FigureMetric(
        "cmpfleet_engine_spec_decode_mean_accepted_tokens",
        "Tokens per speculative step over the window (accepted drafts plus the bonus token).")),
    EngineFigure("prefix_cache_hit_ratio", True, FigureMetric(
        "cmpfleet_engine_prefix_cache_hit_ratio",
        "Share of prompt tokens the engine's prefix cache served over the window.")),
    # The load: each sample keeps it under its own columns (tokens/s, requests, KV cache).
    EngineFigure("requests_running", metric=FigureMetric(
        "cmpfleet_engine_requests_running", "Requests the engine runs now.")),
    EngineFigure("requests_waiting", metric=FigureMetric(
        "cmpfleet_engine_requests_waiting", "Requests waiting in the engine's queue.")),
    EngineFigure("kv_cache_usage_pct", metric=FigureMetric(
        "cmpfleet_engine_kv_cache_usage_ratio", "Share of the engine's KV cache in use.", 0.01)),
    EngineFigure("preemptions_total", True, FigureMetric(
        "cmpfleet_engine_preemptions", "Requests the engine preempted since it started.",
        kind=FigureKind.COUNTER)),
    # The window's own bookkeeping: shown in the status, neither stored nor exported.
    EngineFigure("preemptions_in_window"),
    EngineFigure("window_s"),
    EngineFigure("window_requests"),
)  # fmt: skip

# The figures each engine sample keeps, by name (``engine_samples``' figure columns).
STORED_FIGURES: tuple[str, ...] = tuple(figure.key for figure in FIGURES if figure.stored)
