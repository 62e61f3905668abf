"""vLLM's own figures from its Prometheus ``/metrics``: latency, speculative decoding, cache.

What fleetd keeps of the engine's page: time to first token and inter-token latency
(p50/p95 over a sliding window), speculative decoding's acceptance rate and mean accepted
length, the prefix cache's hit rate, requests running and waiting, preemptions, KV-cache
use and the token counter. Every name is vLLM's; where one changed across versions each
spelling is read and the first found wins:

- inter-token latency: ``vllm:inter_token_latency_seconds`` (v1, 0.10+), else
  ``vllm:time_per_output_token_seconds`` (its older name, still printed beside it);
- speculative decoding: the v1 counters ``vllm:spec_decode_num_drafts``,
  ``..._num_draft_tokens``, ``..._num_accepted_tokens`` (acceptance = accepted / draft
  tokens, mean accepted length = 1 + accepted / drafts, the bonus token included, as vLLM
  logs it), else v0's gauge ``vllm:spec_decode_draft_acceptance_rate``;
- prefix cache: ``vllm:prefix_cache_queries``/``_hits`` (0.9+), else the deprecated
  ``vllm:gpu_prefix_cache_queries``/``_hits``, else v0's gauge
  ``vllm:gpu_prefix_cache_hit_rate``;
- KV cache: ``vllm:kv_cache_usage_perc``, else ``vllm:gpu_cache_usage_perc`` (before 0.10).

Counters and histograms are cumulative since the engine started, so every figure is the
difference between two readings: the newest and the newest one at least ``window_s``
older (or the oldest kept). A counter that went down means the engine restarted: the
readings before it are dropped. Values of every label set (``model_name``, ``engine``)
are summed.

Why a hand parser: a real vLLM page is 100-300 KB (two dozen histograms with 20-odd
buckets each, per engine) and fleetd reads it every ``[serving] metrics_interval_s``.
prometheus_client's parser builds an object for every sample of every family; this one
looks at each line's name and parses only the few families kept (``bench/canary_cost.py``
measures both on a vLLM-sized page).
"""

from __future__ import annotations

import bisect
import math
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal


class MetricsParseError(ValueError):
    """The text is not Prometheus exposition format (the message says where)."""


Kind = Literal["counter", "gauge", "histogram"]

# Canonical key -> vLLM's names, newest spelling first.
COUNTER_NAMES: dict[str, tuple[str, ...]] = {
    "generation_tokens": ("vllm:generation_tokens",),
    "prompt_tokens": ("vllm:prompt_tokens",),
    "spec_drafts": ("vllm:spec_decode_num_drafts",),
    "spec_draft_tokens": ("vllm:spec_decode_num_draft_tokens",),
    "spec_accepted_tokens": ("vllm:spec_decode_num_accepted_tokens",),
    "prefix_queries": ("vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries"),
    "prefix_hits": ("vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits"),
    "preemptions": ("vllm:num_preemptions",),
}
GAUGE_NAMES: dict[str, tuple[str, ...]] = {
    "requests_running": ("vllm:num_requests_running",),
    "requests_waiting": ("vllm:num_requests_waiting",),
    "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "spec_acceptance_rate": ("vllm:spec_decode_draft_acceptance_rate",),
    "prefix_hit_rate": ("vllm:gpu_prefix_cache_hit_rate",),
}
HISTOGRAM_NAMES: dict[str, tuple[str, ...]] = {
    "ttft": ("vllm:time_to_first_token_seconds",),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
}
DEFAULT_WINDOW_S = 300.0

_SAMPLE_RE = re.compile(
    r"^[A-Za-z_:][A-Za-z0-9_:]*(\{.*\})?[ \t]+"
    r"(?:[-+]?(?:[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?|Inf)|NaN)(?:[ \t]+-?[0-9]+)?[ \t]*$"
)
_LE_RE = re.compile(r'(?:^|[{,])\s*le="([^"]*)"')
_Part = Literal["value", "bucket", "sum", "count"]


def _sample_table() -> dict[str, tuple[Kind, str, int, _Part]]:
    """Sample name -> (kind, canonical key, spelling rank, which part of a histogram)."""
    table: dict[str, tuple[Kind, str, int, _Part]] = {}
    for key, names in COUNTER_NAMES.items():
        for rank, name in enumerate(names):
            table[f"{name}_total"] = ("counter", key, rank, "value")
            table.setdefault(name, ("counter", key, rank, "value"))  # exporters without _total
    for key, names in GAUGE_NAMES.items():
        for rank, name in enumerate(names):
            table[name] = ("gauge", key, rank, "value")
    for key, names in HISTOGRAM_NAMES.items():
        for rank, name in enumerate(names):
            table[f"{name}_bucket"] = ("histogram", key, rank, "bucket")
            table[f"{name}_sum"] = ("histogram", key, rank, "sum")
            table[f"{name}_count"] = ("histogram", key, rank, "count")
    return table


_SAMPLES = _sample_table()


@dataclass(frozen=True, slots=True)
class Histogram:
    """Cumulative bucket counts by upper bound (``+Inf`` last), as Prometheus exposes them."""

    bounds: tuple[float, ...]
    cumulative: tuple[float, ...]

    @property
    def count(self) -> float:
        """Observations in all (the ``+Inf`` bucket)."""
        return self.cumulative[-1] if self.cumulative else 0.0

    def minus(self, older: Histogram) -> Histogram | None:
        """The observations made since ``older``; None when the buckets differ or went down."""
        if older.bounds != self.bounds:
            return None
        counts = tuple(
            new - old for new, old in zip(self.cumulative, older.cumulative, strict=True)
        )
        if any(count < 0 for count in counts):
            return None
        return Histogram(self.bounds, counts)

    def quantile(self, q: float) -> float | None:
        """``histogram_quantile``: linear within the bucket; ``None`` with no observations.

        A quantile in the ``+Inf`` bucket is the highest finite bound, as Prometheus says.
        """
        total = self.count
        if total <= 0 or not self.bounds:
            return None
        rank = q * total
        index = bisect.bisect_left(self.cumulative, rank)
        index = min(index, len(self.bounds) - 1)
        upper = self.bounds[index]
        if math.isinf(upper):
            finite = [bound for bound in self.bounds if not math.isinf(bound)]
            return finite[-1] if finite else None
        lower = 0.0 if index == 0 else self.bounds[index - 1]
        below = 0.0 if index == 0 else self.cumulative[index - 1]
        in_bucket = self.cumulative[index] - below
        if in_bucket <= 0:
            return upper
        return lower + (upper - lower) * (rank - below) / in_bucket


@dataclass(frozen=True, slots=True)
class EngineReading:
    """One scrape, the kept families only, by canonical key (summed over label sets)."""

    counters: Mapping[str, float] = field(default_factory=dict)
    gauges: Mapping[str, float] = field(default_factory=dict)
    histograms: Mapping[str, Histogram] = field(default_factory=dict)


def _bound(text: str) -> float:
    return math.inf if text in ("+Inf", "Inf", "inf") else float(text)


def _check_first_sample(line: str, number: int) -> None:
    if not _SAMPLE_RE.match(line):
        raise MetricsParseError(f"line {number} is not a metric sample: {line[:60]!r}")


def parse_engine_metrics(text: str) -> EngineReading:
    """The kept families of one ``/metrics`` page; ``MetricsParseError`` on garbage.

    Only the first sample line is checked in full (an HTML error page or a wrong port fails
    there); after that, lines of other families are skipped unread.
    """
    plain: dict[tuple[str, str, int], float] = {}
    buckets: dict[tuple[str, int], dict[float, float]] = {}
    first_checked = False
    for number, line in enumerate(text.splitlines(), start=1):
        if not line or line[0] == "#":
            continue
        if not first_checked:
            _check_first_sample(line, number)
            first_checked = True
        brace = line.find("{")
        space = line.find(" ")
        if brace != -1 and (space == -1 or brace < space):
            name = line[:brace]
        else:
            name = line[:space] if space != -1 else line
        entry = _SAMPLES.get(name)
        if entry is None:
            continue
        kind, key, rank, part = entry
        close = line.rfind("}") if brace != -1 else -1
        rest = line[close + 1 :] if close != -1 else line[len(name) :]
        fields = rest.split()
        try:
            value = float(fields[0])
        except (IndexError, ValueError):
            raise MetricsParseError(f"line {number}: no number after {name}") from None
        if math.isnan(value):
            continue
        if part == "bucket":
            found = _LE_RE.search(line[brace:close]) if brace != -1 else None
            if found is None:
                raise MetricsParseError(f"line {number}: a bucket of {name} without le")
            try:
                bound = _bound(found.group(1))
            except ValueError:
                raise MetricsParseError(f"line {number}: le={found.group(1)!r}") from None
            slot = buckets.setdefault((key, rank), {})
            slot[bound] = slot.get(bound, 0.0) + value
            continue
        if part in ("sum", "count"):
            continue  # quantiles come from the buckets
        plain_key = (kind, key, rank)
        plain[plain_key] = plain.get(plain_key, 0.0) + value
    counters: dict[str, float] = {}
    gauges: dict[str, float] = {}
    for (family, key, _rank), value in sorted(plain.items(), key=lambda item: item[0][2]):
        target = counters if family == "counter" else gauges
        target.setdefault(key, value)  # the newest spelling (lowest rank) first
    histograms: dict[str, Histogram] = {}
    for (key, _rank), by_bound in sorted(buckets.items(), key=lambda item: item[0][1]):
        if key in histograms:
            continue
        bounds = tuple(sorted(by_bound))
        histograms[key] = Histogram(bounds, tuple(by_bound[b] for b in bounds))
    return EngineReading(counters, gauges, histograms)


@dataclass(frozen=True, slots=True)
class EngineFigures:
    """What fleetd shows of the engine's own metrics; ``None``: not known (yet).

    Latency quantiles, acceptance and hit rates are over the window (``window_s`` long,
    ``window_requests`` first tokens in it); ``preemptions_total`` is since the engine's
    start. ``spec_mean_accepted_tokens`` counts the bonus token (1 + accepted per draft).
    """

    ttft_p50_s: float | None = None
    ttft_p95_s: float | None = None
    itl_p50_s: float | None = None
    itl_p95_s: float | None = None
    spec_acceptance_ratio: float | None = None
    spec_mean_accepted_tokens: float | None = None
    prefix_cache_hit_ratio: float | None = None
    preemptions_total: float | None = None
    preemptions_in_window: float | None = None
    window_s: float | None = None
    window_requests: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (rounded: these are for people and charts)."""
        return {key: _rounded(value) for key, value in asdict(self).items()}


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _ratio(part: float | None, whole: float | None) -> float | None:
    if part is None or whole is None or whole <= 0:
        return None
    return max(0.0, min(part / whole, 1.0))


def _delta(new: Mapping[str, float], old: Mapping[str, float], key: str) -> float | None:
    if key not in new or key not in old:
        return None
    return new[key] - old[key]


def went_down(new: EngineReading, old: EngineReading) -> bool:
    """A counter or a histogram's count went down: the engine started over."""
    if any(new.counters[k] < old.counters[k] for k in new.counters.keys() & old.counters.keys()):
        return True
    return any(
        new.histograms[k].count < old.histograms[k].count
        for k in new.histograms.keys() & old.histograms.keys()
    )


def figures_between(
    new: EngineReading, old: EngineReading | None, span_s: float | None
) -> EngineFigures:
    """The figures of what happened between ``old`` and ``new`` (``None``: since the start)."""
    base = old or EngineReading()
    quantiles: dict[str, float | None] = {}
    requests: float | None = None
    for key in ("ttft", "itl"):
        histogram = new.histograms.get(key)
        earlier = base.histograms.get(key)
        window = histogram if histogram is None or earlier is None else histogram.minus(earlier)
        quantiles[f"{key}_p50_s"] = None if window is None else window.quantile(0.50)
        quantiles[f"{key}_p95_s"] = None if window is None else window.quantile(0.95)
        if key == "ttft" and window is not None:
            requests = window.count
    counters, older = new.counters, base.counters if old is not None else {}

    def since(key: str) -> float | None:
        if old is None:
            return counters.get(key)
        return _delta(counters, older, key)

    acceptance = _ratio(since("spec_accepted_tokens"), since("spec_draft_tokens"))
    if acceptance is None and "spec_draft_tokens" not in counters:
        acceptance = new.gauges.get("spec_acceptance_rate")
    drafts, accepted = since("spec_drafts"), since("spec_accepted_tokens")
    mean_length = None if not drafts or accepted is None else 1.0 + accepted / drafts
    hit = _ratio(since("prefix_hits"), since("prefix_queries"))
    if hit is None and "prefix_queries" not in counters:
        hit = new.gauges.get("prefix_hit_rate")
    return EngineFigures(
        spec_acceptance_ratio=acceptance,
        spec_mean_accepted_tokens=mean_length,
        prefix_cache_hit_ratio=hit,
        preemptions_total=counters.get("preemptions"),
        preemptions_in_window=since("preemptions"),
        window_s=span_s,
        window_requests=requests,
        **quantiles,
    )


class MetricsWindow:
    """The readings of the last ``window_s`` seconds (monotonic times), and their figures.

    Not thread-safe: one window belongs to one scraper.
    """

    def __init__(self, window_s: float = DEFAULT_WINDOW_S) -> None:
        self.window_s = window_s
        self._readings: deque[tuple[float, EngineReading]] = deque()

    def reset(self) -> None:
        """Forget every reading (a new engine)."""
        self._readings.clear()

    def add(self, at_s: float, reading: EngineReading) -> EngineFigures:
        """Keep ``reading`` (taken at monotonic ``at_s``) and return the window's figures."""
        if self._readings and went_down(reading, self._readings[-1][1]):
            self._readings.clear()
        self._readings.append((at_s, reading))
        # Keep one reading at least window_s old (the baseline), drop those before it.
        while len(self._readings) > 2 and at_s - self._readings[1][0] >= self.window_s:
            self._readings.popleft()
        if len(self._readings) < 2:
            return figures_between(reading, None, None)
        then_s, then = self._readings[0]
        return figures_between(reading, then, at_s - then_s)
