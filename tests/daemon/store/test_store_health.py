"""Stale data is never OK: a store that cannot write is critical, a stuck poller is UNKNOWN.

A real fleetd with a real SQLite file locked by a real second process, a real small
filesystem filled up, and a real fleetd API in front of a poller whose driver hangs.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from daemon.config import load_settings
from daemon.runtime import Daemon
from daemon.sdnotify import Notifier
from hwcheck.backend import GpuBackend
from hwcheck.model import RigSnapshot
from hwcheck.sim.rig import SimulatedRig
from hwcheck.sim.scenario import load_scenario
from tests.support.cli import run_fleetctl_here as fleetctl
from tests.support.fleetd import Fleetd, free_port, start_fleetd, stop_all, wait_until
from tests.support.small_disk import _fill, small_fs
from tests.support.sqlite_lock import lock_held

# Tens of seconds of real processes: collected first (tests/conftest.py), never started last.
pytestmark = pytest.mark.slow(seconds=20)

__all__ = ["small_fs"]  # the fixture, from tests/support


@pytest.fixture
def daemons() -> Iterator[list[Fleetd]]:
    started: list[Fleetd] = []
    yield started
    stop_all(started)


def _no_engine(tmp_path: Path) -> Path:
    config = tmp_path / "fleet.toml"
    config.write_text("[serving]\nautostart = false\n")
    return config


def _status(daemon: Fleetd) -> dict[str, Any]:
    doc: dict[str, Any] = daemon.get("/api/v1/status").json()
    return doc


def _store_check(doc: dict[str, Any]) -> dict[str, Any]:
    (found,) = [c for c in doc["checks"] if c["id"] == "store"]
    return dict(found)


def _lines(daemon: Fleetd, needle: str) -> int:
    return sum(needle in line for line in daemon.log().splitlines())


def _assert_store_outage_is_reported(daemon: Fleetd, remedy: str) -> None:
    """Critical with the store check, fresh picture, one log line however many polls."""
    wait_until(
        lambda: _store_check(_status(daemon))["severity"] == "critical", 40, "store critical"
    )
    doc = _status(daemon)
    assert doc["overall"] == "critical", doc["checks"]
    assert remedy in _store_check(doc)["remedy"]  # what happened, not a guess
    polls = doc["rig"]["polls"]
    wait_until(lambda: _status(daemon)["rig"]["polls"] >= polls + 4, 20, "polls going on")
    assert _status(daemon)["rig"]["stale"] is False, "the picture in memory stays fresh"
    human = fleetctl("--url", daemon.url, "status")
    assert human.returncode == 2, human.stdout + human.stderr
    assert "store" in human.stdout
    assert remedy in human.stdout
    assert _lines(daemon, "ERROR fleetd: store: ") == 1, daemon.log()


def test_a_store_locked_by_another_process_is_critical_and_recovers(
    tmp_path: Path, daemons: list[Fleetd]
) -> None:
    state = tmp_path / "state"
    daemon = start_fleetd(tmp_path, state, config=_no_engine(tmp_path))
    daemons.append(daemon)
    assert _store_check(_status(daemon))["severity"] == "ok"
    with lock_held(state / "fleet.db"):
        _assert_store_outage_is_reported(daemon, "fuser -v")
    wait_until(lambda: _store_check(_status(daemon))["severity"] == "ok", 40, "store ok again")
    assert _status(daemon)["overall"] == "ok"
    wait_until(lambda: _lines(daemon, "store: writes work again") == 1, 10, "the recovery line")
    assert _lines(daemon, "ERROR fleetd: store: ") == 1
    assert "Traceback" not in daemon.log()


def test_a_full_disk_is_critical_with_its_remedy_and_recovers(
    tmp_path: Path, small_fs: Path, daemons: list[Fleetd]
) -> None:
    daemon = start_fleetd(tmp_path, small_fs / "state", config=_no_engine(tmp_path))
    daemons.append(daemon)
    filler = _fill(small_fs)
    try:
        _assert_store_outage_is_reported(daemon, "free disk space")
        assert "full" in _store_check(_status(daemon))["message"]
    finally:
        filler.unlink()
    wait_until(lambda: _store_check(_status(daemon))["severity"] == "ok", 40, "store ok again")
    wait_until(lambda: _lines(daemon, "store: writes work again") == 1, 10, "the recovery line")
    assert "Traceback" not in daemon.log()


class FreezableBackend:
    """A driver that hangs in a way no call timeout catches (the poller itself is stuck)."""

    name = "freezable"

    def __init__(self, inner: GpuBackend) -> None:
        self._inner = inner
        self.frozen = threading.Event()
        self.thawed = threading.Event()

    def snapshot(self) -> RigSnapshot:
        if self.frozen.is_set():
            self.thawed.wait(60)
        return self._inner.snapshot()

    def set_power_limit(self, index: int, watts: float) -> None:
        self._inner.set_power_limit(index, watts)

    def close(self) -> None:
        self.thawed.set()
        self._inner.close()


def test_a_stuck_poller_turns_status_unknown_exit_3(tmp_path: Path) -> None:
    port = free_port()
    settings = load_settings(
        None,
        environ={},
        overrides={
            "web": {"listen": f"127.0.0.1:{port}"},
            "poll": {"interval_s": 0.2, "nvml_timeout_s": 0.5},
        },
    )
    state = tmp_path / "state"
    rig = SimulatedRig(load_scenario("healthy"), state)
    backend = FreezableBackend(rig.host_sources().gpu)
    host = dataclasses.replace(rig.host_sources(), gpu=backend)
    daemon = Daemon(settings, state, host, rig, Notifier({}))
    daemon.start()
    main_loop = threading.Thread(target=daemon.run, name="test-main-loop")
    main_loop.start()
    url = f"http://127.0.0.1:{port}"
    try:
        assert fleetctl("--url", url, "status").returncode == 0
        backend.frozen.set()
        wait_until(
            lambda: fleetctl("--url", url, "--json", "status").returncode == 3, 30, "UNKNOWN"
        )
        human = fleetctl("--url", url, "status")
        assert human.returncode == 3
        assert "STALE: no fresh reading for" in human.stdout
        assert "overall: UNKNOWN" in human.stdout
        backend.frozen.clear()
        backend.thawed.set()
        wait_until(lambda: fleetctl("--url", url, "status").returncode == 0, 30, "OK again")
    finally:
        backend.thawed.set()
        daemon.request_stop()
        main_loop.join(30)
        daemon.shutdown()
