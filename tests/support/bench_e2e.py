"""A fleetd with its simulated engine ready and idle, for the ``fleetctl bench`` tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

from daemon.statedir import StateDir
from tests.support.cli import run_fleetctl_here
from tests.support.fleetd import Fleetd, start_fleetd
from tests.support.waiting import wait_until


def engine_ready(daemon: Fleetd) -> bool:
    return bool(daemon.get("/api/v1/status").json()["serving"]["state"] == "ready")


def caps_w(daemon: Fleetd) -> list[float]:
    return [card["power_limit_w"] for card in daemon.get("/api/v1/status").json()["cards"]]


def bench_fleetctl(daemon: Fleetd, *args: str) -> subprocess.CompletedProcess[str]:
    """fleetctl (in this process) against ``daemon`` with its token."""
    token = str(StateDir(daemon.state_dir).token)
    return run_fleetctl_here("--url", daemon.url, "--token-file", token, *args)


def start_serving(tmp: Path, name: str, simulate: str, config: str = "") -> Fleetd:
    """fleetd on ``simulate`` in ``tmp/name``, its engine ready."""
    directory = tmp / name
    directory.mkdir()
    config_path = directory / "fleet.toml"
    config_path.write_text(config or "[serving]\nstop_timeout_s = 5\n")
    daemon = start_fleetd(directory, directory / "state", simulate=simulate, config=config_path)
    wait_until(lambda: engine_ready(daemon), 30, "the simulated engine ready")
    return daemon


def wait_idle(daemon: Fleetd) -> None:
    """The first canary round over (it would be live traffic for the bench)."""

    def idle() -> bool:
        metrics = daemon.get("/api/v1/status").json()["serving"].get("metrics") or {}
        return bool(metrics) and not metrics.get("requests_running")

    wait_until(idle, 60, "the engine idle (the first canary round done)")
