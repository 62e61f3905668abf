"""fleetd's cost while it polls: CPU seconds per poll, average CPU % of one core, peak RSS.

Runs a real fleetd on the simulated 8-card rig polling at 1 Hz (engine autostart off, so
only fleetd itself is measured) for --seconds (default 60), then reads its CPU times and
its peak RSS (VmHWM) from /proc. Targets: under 2% of one core, RSS under 150 MB.

    python bench/poll_overhead.py [--seconds 60] [--interval 1]
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
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def vm_hwm_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))  # run the finally
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="cmpfleet-bench-") as tmp:
        config = Path(tmp) / "fleet.toml"
        config.write_text(f"[poll]\ninterval_s = {args.interval}\n[serving]\nautostart = false\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("CMPFLEET_")}
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "daemon.fleetd",
                "--simulate",
                "healthy-8",
                "--config",
                str(config),
                "--state-dir",
                f"{tmp}/state",
                "--listen",
                f"127.0.0.1:{port}",
                "--log-level",
                "warning",
            ],
            env=env,
        )
        try:
            measured = measure(proc, port, args.seconds)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    report(args.interval, measured)


@dataclass(frozen=True)
class Measured:
    """What one measurement saw."""

    elapsed_s: float
    cpu_s: float
    polls: int
    rss_mib: float
    peak_mib: float


def measure(proc: subprocess.Popen[bytes], port: int, seconds: float) -> Measured:
    """Wait for fleetd's first poll, then its CPU, polls and memory over ``seconds``."""
    url = f"http://127.0.0.1:{port}/api/v1/status"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(url, timeout=1).json()["rig"]["polls"] >= 1:
                break
        except (httpx.HTTPError, KeyError, ValueError):
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            sys.exit("fleetd did not start")
        time.sleep(0.2)
    ps = psutil.Process(proc.pid)
    polls_0 = httpx.get(url, timeout=5).json()["rig"]["polls"]
    cpu_0 = ps.cpu_times()
    t0 = time.monotonic()
    time.sleep(seconds)
    cpu_1 = ps.cpu_times()
    elapsed_s = time.monotonic() - t0
    polls_1 = httpx.get(url, timeout=5).json()["rig"]["polls"]
    cpu_s = (cpu_1.user - cpu_0.user) + (cpu_1.system - cpu_0.system)
    return Measured(
        elapsed_s,
        cpu_s,
        max(polls_1 - polls_0, 1),
        ps.memory_info().rss / 2**20,
        vm_hwm_mib(proc.pid),
    )


def report(interval_s: float, measured: Measured) -> None:
    """The figures, with their targets."""
    cpu_s, polls, elapsed_s = measured.cpu_s, measured.polls, measured.elapsed_s
    print(f"fleetd, simulated 8-card rig, poll interval {interval_s} s, {elapsed_s:.0f} s measured")
    print(f"polls: {polls}")
    print(f"CPU seconds per poll: {cpu_s / polls * 1000:.2f} ms")
    print(f"average CPU: {cpu_s / elapsed_s * 100:.2f} % of one core (target < 2 %)")
    print(
        f"RSS now: {measured.rss_mib:.1f} MiB, peak RSS (VmHWM): {measured.peak_mib:.1f} MiB "
        "(target < 150 MB)"
    )


if __name__ == "__main__":
    main()
