"""API under load: 50 concurrent clients on /api/v1/status and /metrics while fleetd polls.

Runs a real fleetd on the simulated 8-card rig polling at 1 Hz (engine autostart off), then
--clients (default 50) asyncio clients on loopback each alternate GET /api/v1/status and
GET /metrics for --seconds (default 30). Prints requests/s, p50/p99 latency per route, the
daemon's poll-interval jitter during the load (from the distinct ``rig.last_poll`` times the
status answers carry: how far each gap between polls is from the interval), and the
dashboard's first load (bytes and requests for ``/`` and every asset it pulls in, ES module
imports included; its API calls come after). Targets: p99 under 50 ms, jitter under 100 ms.

    python bench/api_load.py [--seconds 30] [--clients 50] [--interval 1]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import httpx
import psutil

ROUTES = ("/api/v1/status", "/metrics")
ASSET_REF = re.compile(r"""(?:src|href)="(/[^"]+)"|from\s+"(\./[^"]+)"|import\s+"(\./[^"]+)\"""")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


async def client(
    http: aiohttp.ClientSession,
    url: str,
    until_s: float,
    latencies: dict[str, list[float]],
    poll_times: set[str],
    errors: list[str],
) -> None:
    turn = 0
    while time.monotonic() < until_s:
        route = ROUTES[turn % len(ROUTES)]
        turn += 1
        began = time.perf_counter()
        try:
            async with http.get(url + route) as answer:
                body = await answer.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            errors.append(f"{route}: {exc.__class__.__name__}")
            continue
        latencies[route].append(time.perf_counter() - began)
        if answer.status != 200:
            errors.append(f"{route}: HTTP {answer.status}")
        elif route == "/api/v1/status":
            last = json.loads(body)["rig"]["last_poll"]
            if last:
                poll_times.add(last)


async def load(
    url: str, clients: int, seconds: float
) -> tuple[dict[str, list[float]], set[str], list[str], float]:
    """``clients`` closed-loop clients (each sends its next request when the last answered).

    aiohttp rather than httpx: on a 2-core machine the load generator shares the CPU with
    fleetd, and httpx's async pool spent about 5 ms of CPU a request (it, not fleetd,
    set the pace); aiohttp's C parser costs a fraction of that.
    """
    latencies: dict[str, list[float]] = {route: [] for route in ROUTES}
    poll_times: set[str] = set()
    errors: list[str] = []
    connector = aiohttp.TCPConnector(limit=clients)
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
        began = time.monotonic()
        until_s = began + seconds
        await asyncio.gather(
            *(client(http, url, until_s, latencies, poll_times, errors) for _ in range(clients))
        )
        elapsed_s = time.monotonic() - began
    return latencies, poll_times, errors, elapsed_s


def jitter_ms(poll_times: set[str], interval_s: float, since: datetime) -> list[float]:
    """How far each gap between consecutive polls taken from ``since`` is from the interval, ms.

    Polls before the load are left out: fleetd's start-up polls (before READY) are not on
    the interval's grid, and they say nothing about polling under load.
    """
    stamps = sorted(s for s in (datetime.fromisoformat(t) for t in poll_times) if s >= since)
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(stamps)]
    return [abs(gap - interval_s) * 1000 for gap in gaps]


def first_load(url: str) -> tuple[int, int]:
    """Bytes and requests of the dashboard's first load (the page and every asset)."""
    seen: set[str] = set()
    pending = ["/"]
    total = 0
    with httpx.Client(base_url=url, timeout=10) as http:
        while pending:
            path = pending.pop()
            if path in seen:
                continue
            seen.add(path)
            answer = http.get(path, follow_redirects=True)
            total += len(answer.content)
            if not path.endswith((".html", ".js", "/")):
                continue
            base = path.rsplit("/", 1)[0]
            for absolute, *relative in ASSET_REF.findall(answer.text):
                ref = absolute or next((f"{base}/{r[2:]}" for r in relative if r), "")
                if ref and not ref.startswith(("/docs", "/api/")):
                    pending.append(ref)
    return total, len(seen)


def wait_for_schedule(url: str, proc: subprocess.Popen[bytes], interval_s: float) -> None:
    """Return once fleetd polls on its schedule: two polls one interval apart.

    Its start-up polls (before READY) come closer together; counted as gaps they would
    read as jitter that has nothing to do with the load.
    """
    print("waiting for fleetd to poll on its schedule ...", file=sys.stderr)
    seen: list[datetime] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            last = httpx.get(f"{url}/api/v1/status", timeout=1).json()["rig"]["last_poll"]
        except (httpx.HTTPError, KeyError, ValueError):
            last = None
        if last is not None and (not seen or datetime.fromisoformat(last) != seen[-1]):
            seen.append(datetime.fromisoformat(last))
            gap_s = (seen[-1] - seen[-2]).total_seconds() if len(seen) > 1 else 0.0
            if abs(gap_s - interval_s) < interval_s / 4:
                return
        time.sleep(interval_s / 10)
    sys.exit("fleetd did not start polling on its schedule")


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))  # run the finally
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="cmpfleet-bench-") as tmp:
        config = Path(tmp) / "fleet.toml"
        config.write_text(f"[poll]\ninterval_s = {args.interval}\n[serving]\nautostart = false\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("CMPFLEET_")}
        argv = [sys.executable, "-m", "daemon.fleetd", "--simulate", "healthy-8"]
        argv += ["--config", str(config), "--state-dir", f"{tmp}/state"]
        argv += ["--listen", f"127.0.0.1:{port}", "--log-level", "warning"]
        proc = subprocess.Popen(argv, env=env)
        try:
            wait_for_schedule(url, proc, args.interval)
            fleetd = psutil.Process(proc.pid)
            cpu_before = fleetd.cpu_times()
            load_began = datetime.now(UTC)
            latencies, poll_times, errors, elapsed_s = asyncio.run(
                load(url, args.clients, args.seconds)
            )
            cpu_after = fleetd.cpu_times()
            page_bytes, page_requests = first_load(url)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    count = sum(len(v) for v in latencies.values())
    print(
        f"fleetd, simulated 8-card rig polled every {args.interval} s; {args.clients} clients "
        f"on loopback for {elapsed_s:.0f} s"
    )
    print(f"requests: {count} ({count / elapsed_s:.0f}/s), errors: {len(errors)}")
    cpu_s = (cpu_after.user - cpu_before.user) + (cpu_after.system - cpu_before.system)
    print(
        f"fleetd CPU: {cpu_s / max(count, 1) * 1000:.2f} ms per request, "
        f"{cpu_s / elapsed_s * 100:.0f} % of one core (the machine has {os.cpu_count()} cores)"
    )
    for route, values in latencies.items():
        ms = [v * 1000 for v in values]
        print(
            f"  {route}: {len(ms)} requests, p50 {percentile(ms, 50):.1f} ms, "
            f"p99 {percentile(ms, 99):.1f} ms (target p99 < 50 ms)"
        )
    jitter = jitter_ms(poll_times, args.interval, load_began)
    if jitter:
        print(
            f"poll-interval jitter over {len(jitter)} gaps: median {statistics.median(jitter):.1f} "
            f"ms, max {max(jitter):.1f} ms (target < 100 ms)"
        )
    else:
        print("poll-interval jitter: fewer than two polls seen")
    print(f"dashboard first load: {page_bytes / 1024:.1f} KiB in {page_requests} requests")
    for error in sorted(set(errors))[:5]:
        print(f"  error: {error}")


if __name__ == "__main__":
    main()
