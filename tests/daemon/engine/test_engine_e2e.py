"""The engine under fleetd: autostart, adoption after kill -9, refusals, fleetctl control.

Real fleetd processes, the real simulated engine as their child (then orphan), real HTTP.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import psutil
import pytest

from daemon.store import Store
from tests.support import loopback
from tests.support.engine_e2e import fast_config, fleetctl, healthy_with_engine, serving
from tests.support.fleetd import Fleetd, run_fleetd, start_fleetd, stop_all, wait_until

# Tens of seconds of real processes: collected first (tests/conftest.py), never started last.
pytestmark = pytest.mark.slow(seconds=50)


@pytest.fixture
def daemons() -> Iterator[list[Fleetd]]:
    started: list[Fleetd] = []
    yield started
    stop_all(started)  # engines included: they outlive fleetd by design


def test_a_bad_engine_table_refuses_the_start_in_one_line(tmp_path: Path) -> None:
    """The scenario's [engine] part (parsed by serving.sim) fails before anything runs."""
    scenario = healthy_with_engine(tmp_path / "bad.toml", "\n[engine]\ntokens_per_s = 0\n")
    config = tmp_path / "fleet.toml"
    config.write_text("")
    result = run_fleetd(
        "--simulate", str(scenario), "--state-dir", str(tmp_path / "state"), "--config", str(config)
    )
    assert result.returncode == 2  # a bad scenario file: a person's to fix
    lines = result.stderr.strip().splitlines()
    assert lines == [f"fleetd: scenario {scenario}: engine.tokens_per_s: must be positive, got 0"]


def test_autostart_then_kill9_of_fleetd_adopts_the_running_engine(
    tmp_path: Path, daemons: list[Fleetd]
) -> None:
    state = tmp_path / "state"
    first = start_fleetd(tmp_path, state, config=fast_config(tmp_path))
    daemons.append(first)
    wait_until(lambda: serving(first)["state"] == "ready", 30, "engine ready")
    serving_before = serving(first)
    engine_pid = serving_before["pid"]
    assert isinstance(engine_pid, int)
    # fleetd's systemd plumbing does not leak into the engine (it must not ping the watchdog),
    # nor do its own settings (CMPFLEET_*: a store URL can carry a password); the rest does.
    environ = Path(f"/proc/{engine_pid}/environ").read_bytes().split(b"\0")
    assert not any(v.startswith(b"NOTIFY_SOCKET=") for v in environ)
    assert not any(v.startswith(b"CMPFLEET_POLL_INTERVAL_S=") for v in environ)
    assert any(v.startswith(b"PATH=") for v in environ)
    first.proc.kill()  # kill -9 of fleetd: the engine must survive
    first.proc.wait()
    assert psutil.Process(engine_pid).is_running()
    second = start_fleetd(tmp_path, state, config=fast_config(tmp_path))
    daemons.append(second)
    wait_until(lambda: serving(second)["state"] == "ready", 30, "adopted engine ready")
    after = serving(second)
    assert after["pid"] == engine_pid, "the engine was restarted instead of adopted"
    assert after["adopted"] is True
    assert after["restarts"] == 0
    assert after["url"] == serving_before["url"], "the engine's port is kept per daemon"
    assert "older launch spec" not in second.log()
    # The adopted engine is the same launch: no new row, and the diff stays empty.
    shown = fleetctl(second, "recipe", "show", "--diff")
    assert "same as the last ready launch (#1)" in shown.stdout, shown.stdout
    # A graceful fleetd stop leaves the engine running too (stop_on_exit is false): SIGINT
    # here (Ctrl-C of a foreground fleetd), SIGTERM in the stop_on_exit test below.
    assert second.stop(signal.SIGINT) == 0
    assert psutil.Process(engine_pid).is_running()


def test_fleetctl_controls_and_the_latch_refuses_with_exit_4(
    tmp_path: Path, daemons: list[Fleetd]
) -> None:
    state = tmp_path / "state"
    daemon = start_fleetd(tmp_path, state, config=fast_config(tmp_path))
    daemons.append(daemon)
    wait_until(lambda: serving(daemon)["state"] == "ready", 30, "engine ready")
    stopped = fleetctl(daemon, "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert serving(daemon)["state"] == "stopped"
    started = fleetctl(daemon, "start", "--json")
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout)["serving"]["state"] == "ready"
    logs = fleetctl(daemon, "logs", "--lines", "500")
    assert "Application startup complete." in logs.stdout
    shown = fleetctl(daemon, "recipe", "show", "--diff")
    assert shown.returncode == 0, shown.stderr
    assert "serving.sim.engine" in shown.stdout
    assert "same as the last ready launch" in shown.stdout
    pid = serving(daemon)["pid"]
    store = Store.open(f"sqlite:///{state / 'fleet.db'}")
    store.set_latch("Xid 79 on card 1", source="test")
    store.close()
    for command in ("start", "restart"):
        began_s = time.monotonic()
        refused = fleetctl(daemon, command)
        took_s = time.monotonic() - began_s
        assert refused.returncode == 4, (command, refused.stderr)
        assert "reboot required" in refused.stderr and "Xid 79 on card 1" in refused.stderr
        assert "fleetctl reboot --confirm" in refused.stderr  # and what to do about it
        assert len(refused.stderr.strip().splitlines()) == 1
        # A refusal returns at once (fleetctl's own start-up included), the engine untouched.
        assert took_s < 15, f"{command} took {took_s:.1f} s to refuse"
        assert serving(daemon)["state"] == "ready" and serving(daemon)["pid"] == pid
    launches = Store.open(f"sqlite:///{state / 'fleet.db'}")
    try:
        assert launches.last_ready_launch() is not None
    finally:
        launches.close()


def test_a_crash_is_classified_and_restarted_with_backoff(
    tmp_path: Path, daemons: list[Fleetd]
) -> None:
    scenario = healthy_with_engine(
        tmp_path / "crashy.toml", "\n[engine]\nready_after_s = 0.5\ncrash_after_s = 1.0\n"
    )
    daemon = start_fleetd(
        tmp_path, tmp_path / "state", simulate=str(scenario), config=fast_config(tmp_path)
    )
    daemons.append(daemon)
    wait_until(lambda: int(serving(daemon)["restarts"]) >= 1, 40, "a restart after the crash")  # type: ignore[call-overload]
    events = daemon.get("/api/v1/events?kind=serving&limit=200").json()
    assert any("cuda_fault" in e["message"] for e in events), [e["message"] for e in events]


def test_engine_metrics_reach_the_status_and_the_store(
    tmp_path: Path, daemons: list[Fleetd]
) -> None:
    state = tmp_path / "state"
    daemon = start_fleetd(
        tmp_path, state, config=fast_config(tmp_path), env={"CMPFLEET_POLL_INTERVAL_S": "0.3"}
    )
    daemons.append(daemon)
    wait_until(lambda: serving(daemon)["state"] == "ready", 30, "engine ready")
    url = str(serving(daemon)["url"])
    reply = loopback.post(
        url + "/v1/chat/completions",
        json={
            "model": "dsv4s",
            "messages": [{"role": "user", "content": "count to twenty"}],
            "max_tokens": 20,
        },
        timeout=30,
    )
    assert reply.status_code == 200, reply.text

    def scraped() -> bool:
        metrics = serving(daemon).get("metrics")
        return isinstance(metrics, dict) and metrics.get("generation_tokens_per_s") is not None

    wait_until(scraped, 20, "engine metrics in the status")
    store = Store.open(f"sqlite:///{state / 'fleet.db'}")
    try:
        wait_until(
            lambda: store.list_engine_samples(
                datetime.now(UTC) - timedelta(hours=1), datetime.now(UTC) + timedelta(hours=1)
            ),
            20,
            "engine samples stored",
        )
    finally:
        store.close()


def test_stop_on_exit_and_a_second_signal_exits_at_once(
    tmp_path: Path, daemons: list[Fleetd]
) -> None:
    """stop_on_exit makes shutdown wait for a (stubborn) engine; a second SIGTERM cuts it short."""
    scenario = healthy_with_engine(
        tmp_path / "stubborn.toml", "\n[engine]\nready_after_s = 0.5\nignore_sigint = true\n"
    )
    config = tmp_path / "fleet.toml"
    config.write_text(
        "[serving]\nprobe_interval_s = 0.3\nstop_timeout_s = 60\nstop_on_exit = true\n"
    )
    daemon = start_fleetd(tmp_path, tmp_path / "state", simulate=str(scenario), config=config)
    daemons.append(daemon)
    wait_until(lambda: serving(daemon)["state"] == "ready", 30, "engine ready")
    engine_pid = serving(daemon)["pid"]
    daemon.proc.send_signal(signal.SIGTERM)
    wait_until(lambda: "shutting down" in daemon.log(), 10, "graceful shutdown begun")
    with pytest.raises(subprocess.TimeoutExpired):
        daemon.proc.wait(1.0)  # still waiting for the engine that ignores SIGINT
    daemon.proc.send_signal(signal.SIGTERM)
    assert daemon.proc.wait(5) == 1
    assert "second signal, exiting now" in daemon.log()
    assert psutil.pid_exists(int(engine_pid))  # type: ignore[call-overload]


def test_stop_on_exit_stops_a_willing_engine_before_fleetd_exits(
    tmp_path: Path, daemons: list[Fleetd]
) -> None:
    scenario = healthy_with_engine(tmp_path / "quick.toml", "\n[engine]\nready_after_s = 0.5\n")
    config = fast_config(tmp_path)
    config.write_text(config.read_text().replace("[serving]\n", "[serving]\nstop_on_exit = true\n"))
    daemon = start_fleetd(tmp_path, tmp_path / "state", simulate=str(scenario), config=config)
    daemons.append(daemon)
    wait_until(lambda: serving(daemon)["state"] == "ready", 30, "engine ready")
    engine = psutil.Process(int(serving(daemon)["pid"]))  # type: ignore[call-overload]
    assert daemon.stop(signal.SIGTERM) == 0
    assert not engine.is_running() or engine.status() == psutil.STATUS_ZOMBIE
    assert "fleetd is shutting down (stop_on_exit)" in daemon.log()


def test_a_stop_that_does_not_take_is_failed_and_kills_nothing(
    tmp_path: Path, daemons: list[Fleetd]
) -> None:
    scenario = healthy_with_engine(
        tmp_path / "deaf.toml", "\n[engine]\nready_after_s = 0.5\nignore_signals = true\n"
    )
    config = tmp_path / "fleet.toml"
    config.write_text("[serving]\nprobe_interval_s = 0.3\nstop_timeout_s = 1\n")
    daemon = start_fleetd(tmp_path, tmp_path / "state", simulate=str(scenario), config=config)
    daemons.append(daemon)
    wait_until(lambda: serving(daemon)["state"] == "ready", 30, "engine ready")
    engine_pid = int(serving(daemon)["pid"])  # type: ignore[call-overload]
    stopped = fleetctl(daemon, "stop")
    assert stopped.returncode == 1
    assert "stop stuck: reboot recommended" in stopped.stderr
    assert serving(daemon)["state"] == "failed"
    assert psutil.Process(engine_pid).is_running()
    events = daemon.get("/api/v1/events?kind=serving&limit=100").json()
    assert any("stop stuck" in e["message"] for e in events)


def test_an_operator_stop_survives_a_fleetd_restart(tmp_path: Path, daemons: list[Fleetd]) -> None:
    state = tmp_path / "state"
    first = start_fleetd(tmp_path, state, config=fast_config(tmp_path))
    daemons.append(first)
    wait_until(lambda: serving(first)["state"] == "ready", 30, "engine ready")
    assert fleetctl(first, "stop").returncode == 0
    assert first.stop() == 0
    second = start_fleetd(tmp_path, state, config=fast_config(tmp_path))
    daemons.append(second)
    assert serving(second)["state"] == "stopped"
    assert "not autostarting the engine: not started: a person stopped the engine" in second.log()
    assert fleetctl(second, "start").returncode == 0
    assert serving(second)["state"] == "ready"


def test_abandoned_log_followers_never_starve_the_api(
    tmp_path: Path, daemons: list[Fleetd]
) -> None:
    daemon = start_fleetd(tmp_path, tmp_path / "state", config=fast_config(tmp_path))
    daemons.append(daemon)
    wait_until(lambda: serving(daemon)["state"] == "ready", 30, "engine ready")
    url = daemon.url + "/api/v1/serving/logs/follow?lines=0"
    auth = {"Authorization": f"Bearer {daemon.token}"}
    codes: list[int] = []

    def abandon() -> None:
        # The status line is waited for as long as a loaded machine needs (a short read
        # timeout here lost the 200s under load); then the reader goes away mid-stream
        # without a word, as a killed `curl` does: the response is closed unread.
        with httpx.stream("GET", url, headers=auth, timeout=httpx.Timeout(20)) as response:
            codes.append(response.status_code)

    threads = [threading.Thread(target=abandon) for _ in range(45)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert codes.count(200) >= 1 and 429 in codes, codes  # followers are capped
    wait_until(lambda: daemon.get("/healthz").status_code == 200, 10, "the API answering again")
    assert daemon.get("/api/v1/status").status_code == 200
