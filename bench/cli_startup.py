"""Bench how fast fleetctl answers: ``--version``, ``--help`` and ``status`` (median of N).

    .venv/bin/python bench/cli_startup.py [--runs 20] [--compare-venv DIR]

Starts a simulated fleetd (no engine) on a free loopback port, then runs each command
``--runs`` times as a person would (a fresh process each time, stdout a pipe) and prints
the median, p90 and the median CPU time (user + system: the figure least bent by other
work on a shared machine). For comparison it times ``nvitop --help``, ``gpustat --help``
(from ``--compare-venv DIR/bin`` or ``PATH``; said so when not installed), ``python -c
pass`` (the interpreter alone) and ``curl`` of the same status endpoint. The target is a
median under 150 ms for ``fleetctl --version`` and ``fleetctl status``.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

VENV_BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_fleetd(tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    config = tmp / "fleet.toml"
    config.write_text("[serving]\nautostart = false\n")
    url = f"http://127.0.0.1:{free_port()}"
    proc = subprocess.Popen(
        [
            str(VENV_BIN / "fleetd"),
            "--simulate",
            "healthy",
            "--config",
            str(config),
            "--state-dir",
            str(tmp / "state"),
            "--listen",
            url.removeprefix("http://"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/api/v1/status", timeout=1) as answer:
                if b'"cards":[{' in answer.read():
                    return proc, url
        except OSError:
            pass
        time.sleep(0.2)
    proc.terminate()
    raise SystemExit("fleetd did not answer within 60 s")


def timed(argv: list[str], runs: int, env: dict[str, str]) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of ``runs`` fresh runs of ``argv`` (one warm-up run first)."""
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, check=False
        )
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
        if done.returncode not in (0, 1):  # --help of some tools exits 1 without a GPU
            raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr!r}")
    return walls, cpus


def report(label: str, walls: list[float], cpus: list[float]) -> None:
    ms = sorted(w * 1000 for w in walls)
    p90 = ms[max(0, round(0.9 * len(ms)) - 1)]
    print(
        f"{label:<34} median {statistics.median(ms):6.0f} ms   p90 {p90:6.0f} ms"
        f"   cpu median {statistics.median(cpus) * 1000:6.0f} ms"
    )


def find_tool(name: str, venv: Path | None) -> str | None:
    if venv is not None and (venv / "bin" / name).exists():
        return str(venv / "bin" / name)
    return shutil.which(name)


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))  # run the finally
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--compare-venv", type=Path, help="a venv holding nvitop and gpustat")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEETCTL_", "CMPFLEET_"))}
    fleetctl = str(VENV_BIN / "fleetctl")
    with tempfile.TemporaryDirectory(prefix="cli-startup-") as tmp:
        proc, url = start_fleetd(Path(tmp))
        try:
            print(f"{args.runs} runs each, load average {os.getloadavg()[0]:.1f}, fleetd {url}")
            report("python -c pass", *timed([sys.executable, "-c", "pass"], args.runs, env))
            for label, argv in (
                ("fleetctl --version", [fleetctl, "--version"]),
                ("fleetctl --help", [fleetctl, "--help"]),
                ("fleetctl status", [fleetctl, "--url", url, "status"]),
                ("fleetctl status --json", [fleetctl, "--url", url, "status", "--json"]),
            ):
                report(label, *timed(argv, args.runs, env))
            curl = shutil.which("curl")
            if curl:
                report(
                    "curl /api/v1/status",
                    *timed([curl, "-s", url + "/api/v1/status"], args.runs, env),
                )
            for tool in ("nvitop", "gpustat"):
                found = find_tool(tool, args.compare_venv)
                if found is None:
                    print(
                        f"{tool + ' --help':<34} not installed (pip install {tool}; --compare-venv)"
                    )
                    continue
                report(f"{tool} --help", *timed([found, "--help"], args.runs, env))
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
