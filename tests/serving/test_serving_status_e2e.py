"""What a person sees of the engine's state in ``fleetctl``: real fleetd, real simulated engine.

- ``backoff_remaining_s`` counts down between state changes (read from a deadline);
- a crash-breaker hold survives a fleetd restart, with its reason (not "stopped, restarts 2");
- ``fleetctl stop``'s progress line never shows a log line from before the stop request.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import loopback
from tests.support.cli import run_fleetctl_here
from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until

# Tens of seconds of real processes: collected first (tests/conftest.py), never started last.
pytestmark = pytest.mark.slow(seconds=20)

HEALTHY = Path(__file__).resolve().parents[2] / "hwcheck" / "sim" / "scenarios" / "healthy.toml"


@pytest.fixture
def daemons() -> Iterator[list[Fleetd]]:
    started: list[Fleetd] = []
    yield started
    stop_all(started)  # engines included: they outlive fleetd by design


def _scenario(tmp_path: Path, engine_table: str) -> Path:
    path = tmp_path / "scenario.toml"
    path.write_text(HEALTHY.read_text() + "\n[engine]\n" + engine_table)
    return path


def _config(tmp_path: Path, recovery: str, serving: str = "", *, canaries: bool = True) -> Path:
    path = tmp_path / "fleet.toml"
    canary = "" if canaries else "[canary]\nenabled = false\n"
    path.write_text(
        f"[serving]\nprobe_interval_s = 0.3\n{serving}\n[recovery]\n{recovery}\n{canary}"
    )
    return path


def _serving(daemon: Fleetd) -> dict[str, object]:
    serving: dict[str, object] = daemon.get("/api/v1/status").json()["serving"]
    return serving


def _fleetctl(daemon: Fleetd, *args: str) -> subprocess.CompletedProcess[str]:
    return run_fleetctl_here(
        "--url", daemon.url, *args, env={"CMPFLEET_STATE_DIR": str(daemon.state_dir)}
    )


def test_backoff_remaining_counts_down(tmp_path: Path, daemons: list[Fleetd]) -> None:
    scenario = _scenario(tmp_path, "ready_after_s = 0.3\ncrash_after_s = 0.8\n")
    config = _config(tmp_path, "backoff_base_s = 60\nbackoff_max_s = 60\n")
    daemon = start_fleetd(tmp_path, tmp_path / "state", simulate=str(scenario), config=config)
    daemons.append(daemon)
    wait_until(lambda: _serving(daemon)["state"] == "backoff", 30, "the engine in backoff")
    first = _serving(daemon)["backoff_remaining_s"]
    assert isinstance(first, float) and 0 < first <= 60

    def counted_down() -> bool:
        now = _serving(daemon)["backoff_remaining_s"]
        return isinstance(now, float) and now <= first - 1.0

    wait_until(counted_down, 10, "backoff_remaining_s to count down by a second")


def test_a_breaker_hold_survives_a_fleetd_restart_with_its_reason(
    tmp_path: Path, daemons: list[Fleetd]
) -> None:
    scenario = _scenario(tmp_path, "ready_after_s = 0.3\ncrash_after_s = 0.5\n")
    config = _config(
        tmp_path, "backoff_base_s = 0.2\nbackoff_max_s = 0.2\nbreaker_max_restarts = 2\n"
    )
    state_dir = tmp_path / "state"
    first = start_fleetd(tmp_path, state_dir, simulate=str(scenario), config=config)
    daemons.append(first)
    wait_until(lambda: _serving(first)["state"] == "held", 60, "the breaker to hold")
    held = _serving(first)
    assert "held until a person" in str(held["reason"])
    assert first.stop() == 0

    second = start_fleetd(tmp_path, state_dir, simulate=str(scenario), config=config)
    daemons.append(second)
    after = _serving(second)
    assert (after["state"], after["restarts"]) == ("held", held["restarts"])
    assert after["reason"] == held["reason"]
    assert after["since"] == held["since"]
    shown = _fleetctl(second, "status")
    assert f"engine: held, restarts {held['restarts']}" in shown.stdout
    assert "held until a person" in shown.stdout
    # a person's start clears the hold, and it stays cleared across the next restart
    assert _fleetctl(second, "start", "--no-wait").returncode == 0
    wait_until(lambda: _serving(second)["state"] != "held", 10, "the hold cleared")
    assert second.stop() == 0
    third = start_fleetd(tmp_path, state_dir, simulate=str(scenario), config=config)
    daemons.append(third)
    # Not the old hold brought back. The engine still crashes every 0.5 s, so the breaker
    # may trip anew (a new hold, a later ``since``) on a slow machine: that is not the old one.
    now = _serving(third)
    assert now["state"] != "held" or now["since"] != held["since"]


def test_stop_progress_never_shows_a_line_from_before_the_stop(
    tmp_path: Path, daemons: list[Fleetd]
) -> None:
    # The engine ignores SIGINT, so the stop lasts until SIGTERM: progress lines get printed.
    scenario = _scenario(tmp_path, "ready_after_s = 0.3\nignore_sigint = true\n")
    # No canary round: its requests would log engine lines between the two reads below.
    config = _config(tmp_path, "", serving="stop_timeout_s = 3\n", canaries=False)
    daemon = start_fleetd(tmp_path, tmp_path / "state", simulate=str(scenario), config=config)
    daemons.append(daemon)
    wait_until(lambda: _serving(daemon)["state"] == "ready", 30, "the engine ready")
    auth = {"Authorization": f"Bearer {daemon.token}"}
    before = loopback.get(
        daemon.url + "/api/v1/serving/logs?lines=1000", headers=auth, timeout=10
    ).json()["lines"]
    # The last line is engine output: the status carries it for the token holder only.
    with_token = loopback.get(daemon.url + "/api/v1/status", headers=auth, timeout=10).json()
    assert with_token["serving"]["last_log_line"] in before
    assert "last_log_line" not in _serving(daemon)

    stopped = _fleetctl(daemon, "stop")
    assert stopped.returncode == 0, stopped.stderr
    progress = [line for line in stopped.stderr.splitlines() if "] engine stopping" in line]
    assert progress, stopped.stderr
    for line in progress:
        shown = line.split("engine stopping", 1)[1].removeprefix(": ")
        assert shown == "..." or shown not in before, line
    daemon.proc.send_signal(signal.SIGTERM)
