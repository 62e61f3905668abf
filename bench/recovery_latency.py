"""Bench recovery's reaction time: from an Xid line written to the latch being visible.

    .venv/bin/python bench/recovery_latency.py [--runs 50] [--poll-interval-s 5]

Starts a real fleetd on a simulated healthy rig with the simulated engine (the poll
interval at its default, 5 s, so the poll cannot be what answers), then, per run:
writes an Xid 31 line into the simulated kernel log (``POST /api/v1/sim/xid``, the same
path a real NVRM line takes from there), and measures the time from just before that
write until

  (a) the Xid event is stored (seen in ``/api/v1/events``),
  (b) the engine's graceful stop signal is sent (the ``serving stopping`` event: the
      supervisor records it as it sends SIGINT),
  (c) the latch is visible in ``/api/v1/status``.

Each is watched by its own thread polling every 20 ms, so a figure includes at most that
much of polling. A simulated reboot between runs clears the latch and the bring-up starts
a fresh engine. Prints p50/p99/max per measure; target: p99 under 1 s for (a) and (c).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

WATCH_EVERY_S = 0.02
RUN_DEADLINE_S = 30.0


def get(client: httpx.Client, path: str, **kwargs: Any) -> httpx.Response:
    """A GET, sent again once when a kept-alive connection closed before any answer.

    A server may close an idle connection just as the client reuses it; browsers and
    HTTP libraries retry an idempotent request then, and so does this bench.
    """
    try:
        return client.get(path, **kwargs)
    except httpx.RemoteProtocolError:
        return client.get(path, **kwargs)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Rig:
    """A fleetd child process and its API."""

    def __init__(self, tmp: Path, poll_interval_s: float) -> None:
        self.port = free_port()
        self.state = tmp / "state"
        config = tmp / "fleet.toml"
        config.write_text("[serving]\nprobe_interval_s = 0.3\nstop_timeout_s = 5\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("CMPFLEET_")}
        env["CMPFLEET_POLL_INTERVAL_S"] = str(poll_interval_s)
        self.log = (tmp / "fleetd.log").open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "daemon.fleetd",
                "--simulate",
                "healthy",
                "--state-dir",
                str(self.state),
                "--listen",
                f"127.0.0.1:{self.port}",
                "--config",
                str(config),
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        self.client = httpx.Client(base_url=self.url, timeout=10)
        wait(self._answers, 60, "fleetd answering")
        self.headers = {"Authorization": f"Bearer {(self.state / 'api-token').read_text().strip()}"}

    def _answers(self) -> bool:
        try:
            return get(self.client, "/healthz").status_code == 200
        except httpx.HTTPError:
            return False

    def status(self) -> dict[str, Any]:
        doc: dict[str, Any] = get(self.client, "/api/v1/status").json()
        return doc

    def newest_event_id(self, kind: str) -> int:
        rows = get(self.client, "/api/v1/events", params={"kind": kind, "limit": 1}).json()
        return int(rows[0]["id"]) if rows else 0

    def post(self, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        return self.client.post(path, json=body or {}, headers=self.headers)

    def close(self) -> None:
        """Stop fleetd and the engine it started (which outlives fleetd by design)."""
        try:
            engine_pid = self.status()["serving"]["pid"]
        except (httpx.HTTPError, ValueError):
            engine_pid = None
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        if engine_pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(engine_pid), signal.SIGTERM)
        self.client.close()
        self.log.close()


def wait(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"bench: timed out waiting for {what}")
        time.sleep(0.05)


def watch(rig: Rig, seen: Callable[[httpx.Client], bool], out: list[float], key: int) -> None:
    """Poll ``seen`` with a client of its own; store the monotonic time it became true."""
    with httpx.Client(base_url=rig.url, timeout=10) as client:
        deadline = time.monotonic() + RUN_DEADLINE_S
        while time.monotonic() < deadline:
            if seen(client):
                out[key] = time.monotonic()
                return
            time.sleep(WATCH_EVERY_S)


def one_run(rig: Rig) -> tuple[float, float, float]:
    xid_before = rig.newest_event_id("xid")
    serving_before = rig.newest_event_id("serving")

    def xid_stored(client: httpx.Client) -> bool:
        rows = get(client, "/api/v1/events", params={"kind": "xid", "limit": 1}).json()
        return bool(rows) and int(rows[0]["id"]) > xid_before

    def stop_signalled(client: httpx.Client) -> bool:
        rows = get(client, "/api/v1/events", params={"kind": "serving", "limit": 20}).json()
        return any(
            int(r["id"]) > serving_before and r["message"].startswith("serving stopping")
            for r in rows
        )

    def latch_visible(client: httpx.Client) -> bool:
        return bool(get(client, "/api/v1/status").json()["recovery"]["reboot_required"])

    seen = [0.0, 0.0, 0.0]
    threads = [
        threading.Thread(target=watch, args=(rig, check, seen, i))
        for i, check in enumerate((xid_stored, stop_signalled, latch_visible))
    ]
    for thread in threads:
        thread.start()
    written_at = time.monotonic()
    answer = rig.post("/api/v1/sim/xid", {"card": 1, "xid": 31})
    answer.raise_for_status()
    for thread in threads:
        thread.join()
    if not all(seen):
        raise SystemExit(f"bench: a run did not finish in {RUN_DEADLINE_S:g} s: {seen}")
    return seen[0] - written_at, seen[1] - written_at, seen[2] - written_at


def reset(rig: Rig) -> None:
    """A simulated reboot: latch cleared, the bring-up starts a fresh engine."""
    boot_before = rig.status()["rig"]["boot_id"]
    rig.post("/api/v1/sim/reboot").raise_for_status()

    def fresh() -> bool:
        doc = rig.status()
        bring_up = doc["recovery"].get("bring_up") or {}
        return (
            bring_up.get("boot_id") not in (None, boot_before)
            and not doc["recovery"]["reboot_required"]
            and doc["serving"]["state"] == "ready"
        )

    wait(fresh, 60, "the bring-up's engine ready")


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--poll-interval-s", type=float, default=5.0)
    args = parser.parse_args()
    if args.runs < 1:
        raise SystemExit("bench: --runs must be at least 1")
    # A SIGTERM (a CI timeout, kill) ends the bench through its finally: fleetd and its
    # engine are stopped rather than left running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    with tempfile.TemporaryDirectory() as tmp:
        rig = Rig(Path(tmp), args.poll_interval_s)
        try:
            wait(lambda: rig.status()["serving"]["state"] == "ready", 60, "engine ready")
            results: list[tuple[float, float, float]] = []
            for run in range(args.runs):
                results.append(one_run(rig))
                print(
                    f"run {run + 1:3d}: stored {results[-1][0] * 1000:7.1f} ms, "
                    f"stop signal {results[-1][1] * 1000:7.1f} ms, "
                    f"latch visible {results[-1][2] * 1000:7.1f} ms",
                    file=sys.stderr,
                )
                reset(rig)
        finally:
            rig.close()
    print(
        f"recovery latency over {args.runs} runs (Xid line written -> ...), poll interval "
        f"{args.poll_interval_s:g} s"
    )
    names = ("(a) Xid event stored", "(b) engine stop signal sent", "(c) latch in /api/v1/status")
    for i, name in enumerate(names):
        values = [r[i] for r in results]
        print(
            f"{name:30s} p50 {percentile(values, 50) * 1000:7.1f} ms   "
            f"p99 {percentile(values, 99) * 1000:7.1f} ms   max {max(values) * 1000:7.1f} ms"
        )


if __name__ == "__main__":
    main()
