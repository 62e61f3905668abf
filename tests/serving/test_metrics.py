"""Engine metrics: parsing vLLM's exposition text, the token rate, scraping a live engine."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import httpx
import pytest

from serving.runtime.metrics import MetricsError, MetricsScraper, parse_metrics, tokens_per_s
from serving.runtime.probes import new_probe_client
from tests.support.engine_helpers import SERVED_NAME, free_port, kill_group, sim_argv
from tests.support.waiting import wait_until

# As vLLM 0.11 prints it (two model names to check the sum over label sets).
VLLM_TEXT = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="dsv4s"} 3.0
vllm:num_requests_running{engine="1",model_name="dsv4s"} 1.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="dsv4s"} 2.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="dsv4s"} 0.25
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="dsv4s"} 1200.0
vllm:generation_tokens_created{engine="0",model_name="dsv4s"} 1.7e9
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="dsv4s"} 4.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="dsv4s"} 5.0
vllm:time_to_first_token_seconds_count{model_name="dsv4s"} 5.0
vllm:time_to_first_token_seconds_sum{model_name="dsv4s"} 0.7
"""


def test_parse_sums_label_sets_and_skips_created_and_histograms() -> None:
    raw = parse_metrics(VLLM_TEXT)
    assert raw.requests_running == 4.0
    assert raw.requests_waiting == 2.0
    assert raw.kv_cache_usage_fraction == 0.25
    assert raw.generation_tokens_total == 1200.0


def test_old_kv_cache_gauge_name_is_accepted() -> None:
    text = "# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc 0.5\n"
    assert parse_metrics(text).kv_cache_usage_fraction == 0.5


def test_missing_metrics_are_none() -> None:
    raw = parse_metrics("# TYPE other gauge\nother 1\n")
    assert raw.generation_tokens_total is None
    assert raw.requests_running is None


def test_garbage_is_a_clear_error() -> None:
    with pytest.raises(MetricsError, match="not Prometheus text format"):
        parse_metrics("this is { not metrics\n")


@pytest.mark.parametrize(
    ("previous", "previous_at", "total", "at", "expected"),
    [
        (100.0, 10.0, 300.0, 14.0, 50.0),
        (None, None, 300.0, 14.0, None),  # first scrape: no rate yet
        (300.0, 10.0, 20.0, 14.0, None),  # counter went down: engine restarted
        (100.0, 10.0, 300.0, 10.0, None),  # no time passed
        (100.0, 10.0, None, 14.0, None),  # counter missing
    ],
)
def test_token_rate(
    previous: float | None,
    previous_at: float | None,
    total: float | None,
    at: float,
    expected: float | None,
) -> None:
    assert tokens_per_s(previous, previous_at, total, at) == expected


@pytest.fixture
def engine_port() -> Iterator[int]:
    port = free_port()
    argv = sim_argv(port, "--sim-tokens-per-s", "200", ready_after_s=0)
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        with httpx.Client(trust_env=False) as client:

            def ready() -> bool:
                try:
                    return client.get(f"http://127.0.0.1:{port}/health").status_code == 200
                except httpx.HTTPError:
                    return False

            wait_until(ready, 10, "the simulated engine to answer /health")
        yield port
    finally:
        kill_group(child.pid)
        child.wait(timeout=5)


def test_scraper_reads_a_live_engine_and_computes_the_rate_on_a_monotonic_clock(
    engine_port: int,
) -> None:
    fake_now = [1000.0]
    url = f"http://127.0.0.1:{engine_port}/metrics"
    with new_probe_client() as client:
        scraper = MetricsScraper(client, clock=lambda: fake_now[0])
        first = scraper.scrape(url)
        assert first.generation_tokens_per_s is None
        assert first.requests_running == 0.0
        assert first.kv_cache_usage_pct == 0.0
        reply = client.post(
            f"http://127.0.0.1:{engine_port}/v1/chat/completions",
            json={
                "model": SERVED_NAME,
                "messages": [{"role": "user", "content": "hello"}],
                "max_tokens": 10,
            },
            timeout=10,
        )
        generated = reply.json()["usage"]["completion_tokens"]
        assert generated == 10
        fake_now[0] += 2.0
        second = scraper.scrape(url)
        assert second.generation_tokens_per_s == pytest.approx(generated / 2.0)
        assert second.as_dict()["ts"].endswith("+00:00")


def test_scraper_reports_an_unreachable_engine_as_metrics_error() -> None:
    with new_probe_client() as client:
        scraper = MetricsScraper(client, timeout_s=0.5)
        with pytest.raises(MetricsError, match=r"GET http.* failed: ConnectError"):
            scraper.scrape(f"http://127.0.0.1:{free_port()}/metrics")
