"""Read the engine's Prometheus ``/metrics`` into a few figures fleetd shows and stores.

vLLM exports a token *counter*; tokens per second is the slope between two scrapes, taken
on the monotonic clock (a wall-clock step must not show as a burst or a stall). A counter
that went down means the engine restarted: that pair of scrapes gives no rate.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

GENERATION_TOKENS = "vllm:generation_tokens"
REQUESTS_RUNNING = "vllm:num_requests_running"
REQUESTS_WAITING = "vllm:num_requests_waiting"
KV_CACHE_USAGE = "vllm:kv_cache_usage_perc"
# vLLM before 0.10 called the KV cache gauge this; still accepted.
KV_CACHE_USAGE_OLD = "vllm:gpu_cache_usage_perc"


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
    """What fleetd shows about the engine's load; ``None`` means not known (yet)."""

    generation_tokens_per_s: float | None
    requests_running: float | None
    requests_waiting: float | None
    kv_cache_usage_pct: float | None
    ts: datetime

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (``ts`` as ISO 8601 with offset)."""
        data = asdict(self)
        data["ts"] = self.ts.isoformat()
        return data


def parse_metrics(text: str) -> RawEngineCounters:
    """Pick the engine's figures out of Prometheus text format.

    Raises :class:`MetricsError` when the text is not Prometheus exposition format.
    """
    sums: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                # Counters come back as family "x" with sample "x_total"; keep only those
                # (not "x_created"), and plain samples of gauges.
                if family.type == "counter" and not sample.name.endswith("_total"):
                    continue
                if family.type in ("histogram", "summary"):
                    continue
                if math.isnan(sample.value):
                    continue
                sums[family.name] = sums.get(family.name, 0.0) + sample.value
    except ValueError as exc:
        raise MetricsError(f"engine /metrics is not Prometheus text format: {exc}") from exc
    kv = sums.get(KV_CACHE_USAGE, sums.get(KV_CACHE_USAGE_OLD))
    return RawEngineCounters(
        generation_tokens_total=sums.get(GENERATION_TOKENS),
        requests_running=sums.get(REQUESTS_RUNNING),
        requests_waiting=sums.get(REQUESTS_WAITING),
        kv_cache_usage_fraction=kv,
    )


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
    ) -> None:
        self._client = client
        self._clock = clock
        self._timeout_s = timeout_s
        self._url: str | None = None
        self._previous_total: float | None = None
        self._previous_at_s: float | None = None

    def reset(self) -> None:
        """Forget the previous scrape (a new engine: its counter starts again)."""
        self._previous_total = None
        self._previous_at_s = None

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
        raw = parse_metrics(response.text)
        rate = tokens_per_s(
            self._previous_total, self._previous_at_s, raw.generation_tokens_total, at_s
        )
        self._previous_total = raw.generation_tokens_total
        self._previous_at_s = at_s
        kv_pct = None if raw.kv_cache_usage_fraction is None else raw.kv_cache_usage_fraction * 100
        return EngineMetrics(
            generation_tokens_per_s=rate,
            requests_running=raw.requests_running,
            requests_waiting=raw.requests_waiting,
            kv_cache_usage_pct=kv_pct,
            ts=datetime.now(UTC),
        )
