"""What the bench matrix itself costs on the simulated engine: wall time, tokens, fleetd's CPU.

Starts a real fleetd on the simulated healthy rig (the simulated engine at its default pace:
30 tok/s decode and 1,600 prefill, which stand for the reference rig's 98.1 and about 5,230
at the default time scale of 3.27 wall seconds per rig second; the after-ready canary round
off, so nothing else runs), waits for the engine, then runs ``fleetctl bench --quick`` and
the default matrix (1, 8 and 64 streams clipped to the preset's 8; 1k, 32k and 100k tokens;
temperature 0 and 1; 128 tokens) through ``POST /api/v1/bench`` and prints, per run: wall
time, cells, prompt and generated tokens (the engine's own counters), fleetd's CPU seconds
and share of one core, the engine's CPU, and the run's verdict. On a real rig the wall time
is about the simulated one divided by the time scale (prompts past 8,192 tokens are read
faster in the simulation: a real 100k prefill takes about 19 s a stream).

    python bench/bench_cost.py [--quick-only]
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


def cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))  # run the finally
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick-only", action="store_true")
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="cmpfleet-bench-") as tmp:
        config = Path(tmp) / "fleet.toml"
        config.write_text(
            "[canary]\nafter_ready = false\ndeep_interval_h = 0\n[serving]\nstop_on_exit = true\n"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("CMPFLEET_")}
        state = Path(tmp) / "state"
        proc = subprocess.Popen(
            [sys.executable, "-m", "daemon.fleetd", "--simulate", "healthy", "--config",
             str(config), "--state-dir", str(state), "--listen", f"127.0.0.1:{port}"],
            env=env, stderr=subprocess.DEVNULL,
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
            engine = psutil.Process(int(serving["pid"]))
            daemon = psutil.Process(proc.pid)
            headers = {"Authorization": f"Bearer {(state / 'api-token').read_text().strip()}"}
            runs = [("--quick", {"quick": True})]
            if not args.quick_only:
                runs.append(("default matrix", {}))
            for name, body in runs:
                prompt_0, gen_0 = engine_tokens(engine_url)
                fleetd_0, engine_0 = cpu_s(daemon), cpu_s(engine)
                began = time.monotonic()
                run = httpx.post(f"{base}/api/v1/bench", headers=headers, json=body, timeout=30)
                run.raise_for_status()
                run_id = run.json()["id"]
                while (doc := httpx.get(f"{base}/api/v1/bench/{run_id}", timeout=10).json())[
                    "state"
                ] == "running":
                    time.sleep(0.5)
                wall_s = time.monotonic() - began
                fleetd_s, engine_s = cpu_s(daemon) - fleetd_0, cpu_s(engine) - engine_0
                prompt_1, gen_1 = engine_tokens(engine_url)
                print(
                    f"{name}: {len(doc['cells'])} cells in {wall_s:.1f} s wall; "
                    f"{prompt_1 - prompt_0:,.0f} prompt and {gen_1 - gen_0:,.0f} generated tokens; "
                    f"fleetd {fleetd_s:.1f} CPU s ({fleetd_s / wall_s:.0%} of a core), "
                    f"engine {engine_s:.1f} CPU s; verdict: {doc['verdict']['text']}"
                )
        finally:
            proc.send_signal(signal.SIGTERM)  # stop_on_exit: the engine goes with it
            proc.wait(60)


if __name__ == "__main__":
    main()
