"""Read the engine's Prometheus ``/metrics`` into a few figures fleetd shows and stores.

vLLM exports a token *counter*; tokens per second is the slope between two scrapes, taken
on the monotonic clock (a wall-clock step must not show as a burst or a stall). A counter
that went down means the engine restarted: that pair of scrapes gives no rate. The
engine's latency, speculative-decoding and prefix-cache figures are windowed over the
last scrapes (``serving.runtime.engine_metrics``, which also parses the page).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from serving.runtime.engine_metrics import (
    DEFAULT_WINDOW_S,
    EngineFigures,
    EngineReading,
    MetricsParseError,
    MetricsWindow,
    parse_engine_metrics,
)


class MetricsError(Exception):
    """The engine's ``/metrics`` could not be read or parsed (message says which)."""


@dataclass(frozen=True)
class RawEngineCounters:
    """The values of one scrape, summed over every ``model_name`` label set.

    A gauge or counter the engine did not export is ``None``.
    """

    generation_tokens_total: float | None
    requests_running: float | None
    requests_waiting: float | None
    kv_cache_usage_fraction: float | None


@dataclass(frozen=True)
class EngineMetrics:
    """What fleetd shows about the engine's load; ``None`` means not known (yet).

    Beside the load, the engine's own figures over the window (``EngineFigures``): time
    to first token and inter-token latency p50/p95, speculative decoding's acceptance
    rate and mean accepted length, the prefix cache's hit rate and preemptions.
    """

    generation_tokens_per_s: float | None
    requests_running: float | None
    requests_waiting: float | None
    kv_cache_usage_pct: float | None
    ts: datetime
    figures: EngineFigures = field(default_factory=EngineFigures)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form: the load, then the figures beside it (``ts`` ISO 8601 with offset)."""
        load = {
            "generation_tokens_per_s": self.generation_tokens_per_s,
            "requests_running": self.requests_running,
            "requests_waiting": self.requests_waiting,
            "kv_cache_usage_pct": self.kv_cache_usage_pct,
        }
        data = {k: round(v, 6) if isinstance(v, float) else v for k, v in load.items()}
        return {**data, "ts": self.ts.isoformat(), **self.figures.as_dict()}


def read_metrics(text: str) -> EngineReading:
    """The kept families of the engine's page; :class:`MetricsError` when it is not one."""
    try:
        return parse_engine_metrics(text)
    except MetricsParseError as exc:
        raise MetricsError(f"engine /metrics is not Prometheus text format: {exc}") from exc


def raw_counters(reading: EngineReading) -> RawEngineCounters:
    """The load figures of one reading."""
    return RawEngineCounters(
        generation_tokens_total=reading.counters.get("generation_tokens"),
        requests_running=reading.gauges.get("requests_running"),
        requests_waiting=reading.gauges.get("requests_waiting"),
        kv_cache_usage_fraction=reading.gauges.get("kv_cache_usage"),
    )


def parse_metrics(text: str) -> RawEngineCounters:
    """Pick the engine's load figures out of Prometheus text format.

    Raises :class:`MetricsError` when the text is not Prometheus exposition format.
    """
    return raw_counters(read_metrics(text))


def tokens_per_s(
    previous_total: float | None,
    previous_at_s: float | None,
    total: float | None,
    at_s: float,
) -> float | None:
    """Slope of the token counter between two scrapes; ``None`` when it cannot be known."""
    if previous_total is None or previous_at_s is None or total is None:
        return None
    elapsed_s = at_s - previous_at_s
    if elapsed_s <= 0 or total < previous_total:
        return None
    return (total - previous_total) / elapsed_s


class MetricsScraper:
    """Scrapes one engine's ``/metrics``; keeps the previous counter for the rate.

    Not thread-safe: one scraper belongs to one caller (the supervisor's loop).
    """

    def __init__(
        self,
        client: httpx.Client,
        *,
        clock: Callable[[], float] = time.monotonic,
        timeout_s: float = 2.0,
        window_s: float = DEFAULT_WINDOW_S,
    ) -> None:
        self._client = client
        self._clock = clock
        self._timeout_s = timeout_s
        self._url: str | None = None
        self._previous_total: float | None = None
        self._previous_at_s: float | None = None
        self._window = MetricsWindow(window_s)

    def reset(self) -> None:
        """Forget the previous scrape (a new engine: its counter starts again)."""
        self._previous_total = None
        self._previous_at_s = None
        self._window.reset()

    def scrape(self, url: str) -> EngineMetrics:
        """GET ``url`` and return the figures; raises :class:`MetricsError` on failure."""
        if url != self._url:
            self._url = url
            self.reset()
        try:
            response = self._client.get(url, timeout=self._timeout_s)
        except httpx.HTTPError as exc:
            raise MetricsError(f"GET {url} failed: {exc.__class__.__name__}: {exc}") from exc
        if response.status_code != 200:
            raise MetricsError(f"GET {url} answered HTTP {response.status_code}")
        at_s = self._clock()
        reading = read_metrics(response.text)
        raw = raw_counters(reading)
        rate = tokens_per_s(
            self._previous_total, self._previous_at_s, raw.generation_tokens_total, at_s
        )
        self._previous_total = raw.generation_tokens_total
        self._previous_at_s = at_s
        figures = self._window.add(at_s, reading)
        kv_pct = None if raw.kv_cache_usage_fraction is None else raw.kv_cache_usage_fraction * 100
        return EngineMetrics(
            generation_tokens_per_s=rate,
            requests_running=raw.requests_running,
            requests_waiting=raw.requests_waiting,
            kv_cache_usage_pct=kv_pct,
            ts=datetime.now(UTC),
            figures=figures,
        )
