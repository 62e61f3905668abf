"""What one canary round costs: wall time, engine tokens, and fleetd's CPU while it runs.

Starts a real fleetd on the simulated healthy rig (the simulated engine at its default
pace, 30 tok/s decode and 1,600 tok/s prefill; the after-ready round off), waits for the
engine, then runs ``--rounds`` rounds through ``POST /api/v1/canary/run`` and prints, per
round on average: wall time, prompt and generated tokens (the engine's own counters), and
fleetd's CPU seconds and share of one core during the round. Defaults are the product's
(40 identifiers, 1,024-token prompt, 128 generated tokens); a real rig's decode is faster,
so its wall time is shorter.

``--deep`` runs the deep round instead (the product's default depths, 16k to 128k
tokens) against the simulated engine paced like a 4-card rig: 5,300 prefill tok/s for
every prompt (``prefill_pace_max_tokens = 0``) and 98 decode tok/s. Its wall time is the
engine time a daily round takes; the share of the engine's day is printed. It then
measures the scrape of the engine's metrics: parsing a vLLM-sized ``/metrics`` page
(two engines, every v1 family) with the hand parser and with prometheus_client's, and
one full scrape (HTTP included) as fleetd's supervisor does it, as a share of one core at
the default ``metrics_interval_s`` (15 s) and at the default poll (2 s).

    python bench/canary_cost.py [--rounds 3] [--filler-tokens 0] [--deep]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil
from prometheus_client.parser import text_string_to_metric_families


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def engine_tokens(engine_url: str) -> tuple[float, float]:
    """(prompt tokens, generated tokens) so far, from the engine's ``/metrics``."""
    totals = {"vllm:prompt_tokens": 0.0, "vllm:generation_tokens": 0.0}
    text = httpx.get(f"{engine_url}/metrics", timeout=5).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if family.name in totals and sample.name.endswith("_total"):
                totals[family.name] += sample.value
    return totals["vllm:prompt_tokens"], totals["vllm:generation_tokens"]


HEALTHY = Path(__file__).resolve().parents[1] / "hwcheck" / "sim" / "scenarios" / "healthy.toml"
# A 4-card PP4 DSpark rig as the field notes measured it.
RIG_PACE = (
    "\n[engine]\ntokens_per_s = 98.0\nprefill_tokens_per_s = 5300.0\nprefill_pace_max_tokens = 0\n"
)


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))  # run the finally
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--filler-tokens", type=int, default=0)
    parser.add_argument("--deep", action="store_true", help="the deep round, paced like a rig")
    args = parser.parse_args()
    if args.deep:
        args.rounds = 1
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="cmpfleet-bench-") as tmp:
        config = Path(tmp) / "fleet.toml"
        config.write_text(
            f"[canary]\nafter_ready = false\nfiller_tokens = {args.filler_tokens}\n"
            "busy_running_requests = 100\ndeep_interval_h = 0\n[serving]\nstop_on_exit = true\n"
        )
        scenario = "healthy"
        if args.deep:
            scenario = str(Path(tmp) / "rig-paced.toml")
            Path(scenario).write_text(HEALTHY.read_text() + RIG_PACE)
        env = {k: v for k, v in os.environ.items() if not k.startswith("CMPFLEET_")}
        state = Path(tmp) / "state"
        proc = subprocess.Popen(
            [sys.executable, "-m", "daemon.fleetd", "--simulate", scenario, "--config",
             str(config), "--state-dir", str(state), "--listen", f"127.0.0.1:{port}",
             "--log-level", "warning"],
            env=env,
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 90
            while True:
                try:
                    serving = httpx.get(f"{base}/api/v1/status", timeout=2).json()["serving"]
                    if serving["state"] == "ready":
                        break
                except (httpx.HTTPError, KeyError, ValueError):
                    pass
                if time.monotonic() > deadline or proc.poll() is not None:
                    sys.exit("fleetd or its engine did not start")
                time.sleep(0.2)
            engine_url = serving["url"]
            token = (state / "api-token").read_text().strip()
            headers = {"Authorization": f"Bearer {token}"}
            ps = psutil.Process(proc.pid)
            walls, cpus, prompts, generated = [], [], [], []
            for _ in range(args.rounds):
                prompt_0, gen_0 = engine_tokens(engine_url)
                cpu_0 = ps.cpu_times()
                t0 = time.monotonic()
                answer = httpx.post(
                    f"{base}/api/v1/canary/run",
                    headers=headers,
                    json={"deep": True} if args.deep else {},
                    timeout=7200,
                )
                walls.append(time.monotonic() - t0)
                cpu_1 = ps.cpu_times()
                prompt_1, gen_1 = engine_tokens(engine_url)
                answer.raise_for_status()
                cpus.append((cpu_1.user - cpu_0.user) + (cpu_1.system - cpu_0.system))
                prompts.append(prompt_1 - prompt_0)
                generated.append(gen_1 - gen_0)
                results = {c["name"]: c["result"] for c in answer.json()["canaries"]}
        finally:
            proc.send_signal(signal.SIGTERM)  # stop_on_exit: the engine goes with it
            proc.wait(60)
    n = len(walls)
    wall_s, cpu_s = sum(walls) / n, sum(cpus) / n
    if args.deep:
        print(
            f"deep round (16k-128k) against the simulated engine paced like a 4-card rig: {results}"
        )
        print(
            f"engine time: {wall_s:.1f} s = {wall_s / 86400 * 100:.2f} % of the engine's day (daily)"
        )
        print(f"tokens: {sum(prompts):.0f} prompt, {sum(generated):.0f} generated")
        print(
            f"fleetd CPU: {cpu_s * 1000:.0f} ms ({cpu_s / wall_s * 100:.2f} % of one core meanwhile)"
        )
        scrape_cost()
        return
    print(f"canary round against the simulated engine (30 tok/s), {n} rounds: {results}")
    print(f"wall time per round: {wall_s:.2f} s (min {min(walls):.2f}, max {max(walls):.2f})")
    print(f"tokens per round: {sum(prompts) / n:.0f} prompt, {sum(generated) / n:.0f} generated")
    print(f"fleetd CPU per round: {cpu_s * 1000:.0f} ms ({cpu_s / wall_s * 100:.1f} % of one core)")


def vllm_page(engines: int = 2) -> str:
    """A vLLM 0.11-sized ``/metrics`` page: every v1 family, per engine, as vLLM prints them."""
    lines: list[str] = []
    histograms = [
        "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
        "vllm:time_per_output_token_seconds", "vllm:e2e_request_latency_seconds",
        "vllm:request_queue_time_seconds", "vllm:request_inference_time_seconds",
        "vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds",
        "vllm:request_prompt_tokens", "vllm:request_generation_tokens",
        "vllm:iteration_tokens_total", "vllm:request_max_num_generation_tokens",
        "vllm:request_params_n", "vllm:request_params_max_tokens",
        "vllm:time_per_prefill_token_request_seconds", "vllm:request_time_per_output_token_seconds",
    ]  # fmt: skip
    counters = [
        "vllm:num_preemptions", "vllm:prompt_tokens", "vllm:generation_tokens",
        "vllm:prefix_cache_queries", "vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_queries",
        "vllm:gpu_prefix_cache_hits", "vllm:spec_decode_num_drafts",
        "vllm:spec_decode_num_draft_tokens", "vllm:spec_decode_num_accepted_tokens",
    ]  # fmt: skip
    gauges = ["vllm:num_requests_running", "vllm:num_requests_waiting",
              "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"]  # fmt: skip
    bounds = [0.001 * 2**i for i in range(22)] + ["+Inf"]
    for engine in range(engines):
        labels = f'engine="{engine}",model_name="dsv4s"'
        for name in gauges:
            lines += [f"# HELP {name} x", f"# TYPE {name} gauge", f"{name}{{{labels}}} 1.0"]
        for name in counters:
            lines += [f"# HELP {name} x", f"# TYPE {name} counter",
                      f"{name}_total{{{labels}}} 12345.0", f"{name}_created{{{labels}}} 1.7e9"]  # fmt: skip
        for position in range(5):
            lines.append(
                f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{position}"}} 9.0'
            )
        for reason in ("stop", "length", "abort", "error"):
            lines.append(f'vllm:request_success_total{{{labels},finished_reason="{reason}"}} 5.0')
        for name in histograms:
            lines += [f"# HELP {name} x", f"# TYPE {name} histogram"]
            for i, bound in enumerate(bounds):
                lines.append(f'{name}_bucket{{{labels},le="{bound}"}} {float(i * 3)}')
            lines += [f"{name}_count{{{labels}}} 66.0", f"{name}_sum{{{labels}}} 12.5"]
    return "\n".join(lines) + "\n"


def _best_ms(run: object, repeat: int = 30) -> float:
    times = []
    for _ in range(repeat):
        started = time.process_time()
        run()  # type: ignore[operator]
        times.append(time.process_time() - started)
    times.sort()
    return times[len(times) // 2] * 1000


def scrape_cost() -> None:
    """The engine-metrics scrape: parsers compared, then a whole scrape as fleetd does it."""
    import http.server
    import threading

    from serving.runtime.engine_metrics import parse_engine_metrics
    from serving.runtime.metrics import MetricsScraper

    page = vllm_page()
    hand = _best_ms(lambda: parse_engine_metrics(page))
    library = _best_ms(lambda: list(text_string_to_metric_families(page)))
    print(f"engine /metrics page: {len(page) / 1024:.0f} KiB, {page.count(chr(10))} lines")
    print(f"parse: hand parser {hand:.2f} ms, prometheus_client {library:.2f} ms (CPU, median)")
    body = page.encode()

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    with httpx.Client(trust_env=False) as client:
        scraper = MetricsScraper(client)
        scraper.scrape(url)
        whole = _best_ms(lambda: scraper.scrape(url), repeat=50)
    server.shutdown()
    for interval_s in (15.0, 2.0):
        print(f"whole scrape {whole:.2f} ms CPU: {whole / 1000 / interval_s * 100:.3f} % of one core "
              f"every {interval_s:g} s")  # fmt: skip


if __name__ == "__main__":
    main()
