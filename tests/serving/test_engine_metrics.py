"""The engine's own figures from vLLM's ``/metrics``: names across versions, quantiles, windows."""

from __future__ import annotations

import math

import pytest

from serving.runtime.engine_metrics import (
    EngineReading,
    Histogram,
    MetricsParseError,
    MetricsWindow,
    figures_between,
    parse_engine_metrics,
)


def page(
    *,
    ttft: tuple[float, ...] = (0, 2, 5, 6),
    itl: tuple[float, ...] = (10, 80, 100, 100),
    drafts: float = 100,
    draft_tokens: float = 500,
    accepted: float = 300,
    queries: float = 10_000,
    hits: float = 2_500,
    preemptions: float = 3,
    engines: int = 2,
) -> str:
    """A vLLM 0.11 (v1) page: two engines (label sets), counters with _total and _created."""
    lines = [
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        "# TYPE vllm:num_requests_running gauge",
    ]
    for engine in range(engines):
        labels = f'engine="{engine}",model_name="dsv4s"'
        lines += [
            f"vllm:num_requests_running{{{labels}}} 1.0",
            f"vllm:num_requests_waiting{{{labels}}} 2.0",
            f"vllm:kv_cache_usage_perc{{{labels}}} 0.25",
            f"vllm:gpu_cache_usage_perc{{{labels}}} 0.99",  # the deprecated twin: ignored
            f"vllm:num_preemptions_total{{{labels}}} {preemptions}",
            f"vllm:num_preemptions_created{{{labels}}} 1.7e9",
            f"vllm:prefix_cache_queries_total{{{labels}}} {queries}",
            f"vllm:prefix_cache_hits_total{{{labels}}} {hits}",
            f"vllm:gpu_prefix_cache_queries_total{{{labels}}} 1.0",  # deprecated twin
            f"vllm:gpu_prefix_cache_hits_total{{{labels}}} 1.0",
            f"vllm:spec_decode_num_drafts_total{{{labels}}} {drafts}",
            f"vllm:spec_decode_num_draft_tokens_total{{{labels}}} {draft_tokens}",
            f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}} {accepted}",
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="0"}} 99.0',
            f"vllm:generation_tokens_total{{{labels}}} 1200.0",
        ]
        for name, counts, bounds in (
            ("vllm:time_to_first_token_seconds", ttft, ("0.1", "0.5", "1.0", "+Inf")),
            ("vllm:inter_token_latency_seconds", itl, ("0.01", "0.025", "0.05", "+Inf")),
            ("vllm:time_per_output_token_seconds", (1, 1, 1, 1), ("0.01", "0.025", "0.05", "+Inf")),
        ):
            for count, bound in zip(counts, bounds, strict=True):
                lines.append(f'{name}_bucket{{{labels},le="{bound}"}} {float(count)}')
            lines.append(f"{name}_count{{{labels}}} {float(counts[-1])}")
            lines.append(f"{name}_sum{{{labels}}} 1.5")
    return "\n".join(lines) + "\n"


def test_a_v1_page_sums_engines_and_prefers_the_new_names() -> None:
    reading = parse_engine_metrics(page())
    assert reading.gauges["requests_running"] == 2.0
    assert reading.gauges["kv_cache_usage"] == 0.5  # kv_cache_usage_perc, not the old twin
    assert reading.counters["prefix_queries"] == 20_000  # not gpu_prefix_cache_queries
    assert reading.counters["spec_accepted_tokens"] == 600  # per_pos is another family
    assert reading.counters["preemptions"] == 6
    # inter_token_latency wins over its older name printed beside it.
    assert reading.histograms["itl"].cumulative == (20, 160, 200, 200)
    assert reading.histograms["ttft"].bounds == (0.1, 0.5, 1.0, math.inf)


def test_since_start_figures_of_one_page() -> None:
    figures = figures_between(parse_engine_metrics(page()), None, None)
    assert figures.spec_acceptance_ratio == pytest.approx(0.6)
    assert figures.spec_mean_accepted_tokens == pytest.approx(4.0)  # 1 + 300/100
    assert figures.prefix_cache_hit_ratio == pytest.approx(0.25)
    assert figures.preemptions_total == 6
    # TTFT cumulative buckets 0, 4, 10, 12 (two engines): rank 6 of 12 is in (0.5, 1.0],
    # 2 of its 6; rank 11.4 is in +Inf, which reads as the highest finite bound.
    assert figures.ttft_p50_s == pytest.approx(0.5 + 0.5 * 2 / 6)
    assert figures.ttft_p95_s == 1.0


def test_older_versions_names_and_v0_gauges() -> None:
    text = "\n".join(
        [
            "vllm:gpu_cache_usage_perc 0.5",
            "vllm:gpu_prefix_cache_hit_rate 0.42",
            "vllm:spec_decode_draft_acceptance_rate 0.71",
            'vllm:time_per_output_token_seconds_bucket{le="0.05"} 4.0',
            'vllm:time_per_output_token_seconds_bucket{le="+Inf"} 4.0',
        ]
    )
    reading = parse_engine_metrics(text)
    figures = figures_between(reading, None, None)
    assert reading.gauges["kv_cache_usage"] == 0.5
    assert figures.prefix_cache_hit_ratio == 0.42
    assert figures.spec_acceptance_ratio == 0.71
    assert figures.spec_mean_accepted_tokens is None  # v0 has no drafts counter
    assert figures.itl_p95_s == pytest.approx(0.05 * 0.95)


def test_a_window_judges_what_happened_in_it_and_forgets_a_restarted_engine() -> None:
    window = MetricsWindow(window_s=10.0)
    window.add(0.0, parse_engine_metrics(page(drafts=100, draft_tokens=500, accepted=300)))
    later = window.add(5.0, parse_engine_metrics(page(drafts=200, draft_tokens=1000, accepted=350)))
    # Only the last 500 draft tokens per engine: 50 accepted of them.
    assert later.spec_acceptance_ratio == pytest.approx(0.1)
    assert later.spec_mean_accepted_tokens == pytest.approx(1.5)
    assert later.window_s == 5.0
    # The same histograms twice: no first token in the window, so no quantile.
    assert later.ttft_p95_s is None
    assert later.window_requests == 0
    restarted = window.add(6.0, parse_engine_metrics(page(drafts=1, draft_tokens=5, accepted=1)))
    assert restarted.window_s is None  # counters went down: a new engine, judged since start
    assert restarted.spec_acceptance_ratio == pytest.approx(0.2)


def test_the_window_keeps_one_baseline_old_enough() -> None:
    window = MetricsWindow(window_s=2.0)
    for at_s in range(6):
        figures = window.add(float(at_s), parse_engine_metrics(page(accepted=100 + 10 * at_s)))
    assert figures.window_s == 2.0


def test_quantiles_at_the_edges() -> None:
    assert Histogram((1.0, math.inf), (0.0, 0.0)).quantile(0.5) is None
    assert Histogram((1.0, math.inf), (0.0, 5.0)).quantile(0.95) == 1.0  # in +Inf: last bound
    empty = EngineReading()
    assert figures_between(empty, None, None).ttft_p50_s is None


@pytest.mark.parametrize(
    "text",
    [
        "<html>502 Bad Gateway</html>\n",
        "this is { not metrics\n",
        "vllm:num_requests_running one\n",
    ],
)
def test_garbage_is_a_clear_error(text: str) -> None:
    with pytest.raises(MetricsParseError, match="line 1"):
        parse_engine_metrics(text)


def test_a_bucket_without_le_is_an_error() -> None:
    good = "vllm:num_requests_running 1\n"
    with pytest.raises(MetricsParseError, match="without le"):
        parse_engine_metrics(good + 'vllm:time_to_first_token_seconds_bucket{model="x"} 3\n')
