"""What one canary round costs: wall time, engine tokens, and fleetd's CPU while it runs.

Starts a real fleetd on the simulated healthy rig (the simulated engine at its default
pace, 30 tok/s decode and 1,600 tok/s prefill; the after-ready round off), waits for the
engine, then runs ``--rounds`` rounds through ``POST /api/v1/canary/run`` and prints, per
round on average: wall time, prompt and generated tokens (the engine's own counters), and
fleetd's CPU seconds and share of one core during the round. Defaults are the product's
(40 identifiers, 1,024-token prompt, 128 generated tokens); a real rig's decode is faster,
so its wall time is shorter.

    python bench/canary_cost.py [--rounds 3] [--filler-tokens 0]
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


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))  # run the finally
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--filler-tokens", type=int, default=0)
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="cmpfleet-bench-") as tmp:
        config = Path(tmp) / "fleet.toml"
        config.write_text(
            f"[canary]\nafter_ready = false\nfiller_tokens = {args.filler_tokens}\n"
            "busy_running_requests = 100\n[serving]\nstop_on_exit = true\n"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("CMPFLEET_")}
        state = Path(tmp) / "state"
        proc = subprocess.Popen(
            [sys.executable, "-m", "daemon.fleetd", "--simulate", "healthy", "--config",
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
                    f"{base}/api/v1/canary/run", headers=headers, json={}, timeout=900
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
    print(f"canary round against the simulated engine (30 tok/s), {n} rounds: {results}")
    print(f"wall time per round: {wall_s:.2f} s (min {min(walls):.2f}, max {max(walls):.2f})")
    print(f"tokens per round: {sum(prompts) / n:.0f} prompt, {sum(generated) / n:.0f} generated")
    print(f"fleetd CPU per round: {cpu_s * 1000:.0f} ms ({cpu_s / wall_s * 100:.1f} % of one core)")


if __name__ == "__main__":
    main()
