"""What ``/api/v1/history`` costs fleetd, beside ``/api/v1/status``.

Fills a fresh state dir's ``fleet.db`` with 24 h of the simulated 8-card rig's samples
(one poll every ``--sample-s``, rolled up as fleetd does), starts a real fleetd on it
(``--simulate healthy-8``, engine autostart off), then sends ``--requests`` sequential
GETs to each route (after a first one, timed alone: it may compute the answer) and
prints fleetd's CPU per request (its process CPU time over the requests) and the p50
latency. History answers are kept per chart window (10 s for
1 h, 60 s for 24 h) and dropped by new rollups, so most requests are served from memory;
the cost of one computed answer (the cost of every request before the cache, issue 22:
about 175 ms) is printed too, measured in-process on the same database.

    .venv/bin/python bench/history_cost.py [--requests 60] [--sample-s 5]

Target: a history request costs about what a status request does (within 5 ms of CPU).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import psutil

from daemon.rig.history import history_document
from daemon.store import Store
from hwcheck.model import GpuSnapshot, RigSnapshot
from hwcheck.sim.scenario import load_scenario

ROUTES = ("/api/v1/status", "/api/v1/history?span=1h", "/api/v1/history?span=24h")
SCENARIO = "healthy-8"
TARGET_EXTRA_MS = 5.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def fill(db: Path, sample_s: int) -> list[tuple[int, str]]:
    """24 h of polls of the scenario's cards ending now, rolled up; the (index, uuid) pairs."""
    cards = [(card.index, card.uuid) for card in load_scenario(SCENARIO).cards]
    end = datetime.now(UTC)
    start = end - timedelta(hours=24)
    store = Store.open(f"sqlite:///{db}")
    batch: list[RigSnapshot] = []
    for t_s in range(0, 86400, sample_s):
        snaps = tuple(
            GpuSnapshot(
                index=index,
                pci_bus_id=f"0000:{index + 1:02x}:00.0",
                uuid=uuid,
                name="NVIDIA CMP 170HX",
                memory_total_mib=65536,
                power_draw_w=round(150.0 + 25.0 * math.sin(t_s / 300.0 + index), 2),
                power_limit_w=180.0,
                sm_clock_mhz=1410 - (t_s + 3 * index) % 30,
                temperature_c=float(60 + (t_s // 60 + index) % 12),
            )
            for index, uuid in cards
        )
        batch.append(RigSnapshot(start + timedelta(seconds=t_s), float(t_s), snaps))
        if len(batch) == 500:
            store.record_samples_batch(batch)
            batch = []
    if batch:
        store.record_samples_batch(batch)
    store.rollup_and_prune(now=end)
    store.close()
    return cards


def computed_ms(db: Path, cards: list[tuple[int, str]], span: str) -> float:
    """CPU of one uncached answer, median of 5, in-process."""
    store = Store.open(f"sqlite:///{db}")
    costs = []
    for _ in range(5):
        began = time.process_time()
        history_document(store, cards, span)
        costs.append((time.process_time() - began) * 1000)
    store.close()
    return statistics.median(costs)


def wait_ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"{url}/api/v1/status", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    sys.exit("fleetd did not answer")


def measure(url: str, pid: int, route: str, requests: int) -> tuple[float, float, float]:
    """The first GET's latency (it may compute), then fleetd's CPU per request and the p50
    latency (ms) of ``requests`` more GETs (a dashboard's refreshes within the window)."""
    process = psutil.Process(pid)
    latencies = []
    with httpx.Client(base_url=url, timeout=10) as http:
        began = time.perf_counter()
        http.get(route).raise_for_status()
        first_ms = (time.perf_counter() - began) * 1000
        before = process.cpu_times()
        for _ in range(requests):
            began = time.perf_counter()
            http.get(route).raise_for_status()
            latencies.append((time.perf_counter() - began) * 1000)
        after = process.cpu_times()
    cpu_ms = ((after.user - before.user) + (after.system - before.system)) * 1000
    return first_ms, cpu_ms / requests, statistics.median(latencies)


def main() -> int:
    """Fill, start, measure, print; 0 when history is within the target of status."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))  # run the finally
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--sample-s", type=int, default=5)
    args = parser.parse_args()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="cmpfleet-bench-") as tmp:
        state = Path(tmp) / "state"
        state.mkdir(mode=0o700)
        cards = fill(state / "fleet.db", args.sample_s)
        uncached = {span: computed_ms(state / "fleet.db", cards, span) for span in ("1h", "24h")}
        config = Path(tmp) / "fleet.toml"
        config.write_text("[serving]\nautostart = false\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("CMPFLEET_")}
        argv = [sys.executable, "-m", "daemon.fleetd", "--simulate", SCENARIO]
        argv += ["--config", str(config), "--state-dir", str(state)]
        argv += ["--listen", f"127.0.0.1:{port}", "--log-level", "warning"]
        proc = subprocess.Popen(argv, env=env)
        try:
            wait_ready(url, proc)
            results = {route: measure(url, proc.pid, route, args.requests) for route in ROUTES}
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    print(
        f"fleetd on {SCENARIO}, 24 h of samples every {args.sample_s} s; "
        f"{args.requests} sequential requests per route"
    )
    for route, (first_ms, cpu_ms, p50_ms) in results.items():
        print(
            f"  {route}: first {first_ms:.1f} ms; then {cpu_ms:.2f} ms CPU per request, "
            f"p50 {p50_ms:.1f} ms"
        )
    for span, cost_ms in uncached.items():
        print(f"  one computed {span} answer (every request, uncached): {cost_ms:.1f} ms CPU")
    status_ms = results[ROUTES[0]][1]
    worst_ms = max(cpu for _, cpu, _ in list(results.values())[1:])
    ok = worst_ms - status_ms <= TARGET_EXTRA_MS
    print(
        f"history over status: {worst_ms - status_ms:+.2f} ms CPU per request "
        f"(target within {TARGET_EXTRA_MS:g} ms: {'ok' if ok else 'MISSED'})"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
