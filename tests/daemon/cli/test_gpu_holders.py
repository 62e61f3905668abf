"""A serving rig's own GPU holders are never foreign: fleetd, the engine, persistenced."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from daemon.cli.rig.gpu_pids import running_daemon_gpu_pids
from tests.support.fleetd import Fleetd, free_port, start_fleetd, stop_all, wait_until


@pytest.fixture
def daemons() -> Iterator[list[Fleetd]]:
    started: list[Fleetd] = []
    yield started
    stop_all(started)


def _status(daemon: Fleetd) -> dict[str, Any]:
    doc: dict[str, Any] = daemon.get("/api/v1/status").json()
    return doc


def test_a_serving_rig_with_persistenced_is_ok(tmp_path: Path, daemons: list[Fleetd]) -> None:
    daemon = start_fleetd(tmp_path, tmp_path / "state", simulate="serving-persistenced")
    daemons.append(daemon)
    wait_until(lambda: _status(daemon)["serving"]["state"] == "ready", 30, "engine ready")
    doc = _status(daemon)
    (foreign,) = [c for c in doc["checks"] if c["id"] == "foreign_gpu_processes"]
    assert foreign["severity"] == "ok", foreign
    assert "pid 812 nvidia-persistenced" in foreign["message"]
    assert doc["overall"] == "ok", [c for c in doc["checks"] if c["severity"] != "ok"]
    # The engine's process tree and fleetd are named for fleetctl check.
    engine_pid = doc["serving"]["pid"]
    assert engine_pid in doc["daemon"]["gpu_pids"]
    assert daemon.proc.pid in doc["daemon"]["gpu_pids"]
    children = {p.pid for p in psutil.Process(engine_pid).children(recursive=True)}
    assert children <= set(doc["daemon"]["gpu_pids"])


def test_fleetctl_check_learns_the_pids_from_a_local_daemon(
    tmp_path: Path, daemons: list[Fleetd]
) -> None:
    daemon = start_fleetd(tmp_path, tmp_path / "state")
    daemons.append(daemon)
    wait_until(lambda: _status(daemon)["serving"]["pid"] is not None, 30, "engine launched")
    pids = running_daemon_gpu_pids(daemon.url, None)
    assert {daemon.proc.pid, _status(daemon)["serving"]["pid"]} <= pids


def test_no_daemon_or_a_remote_one_means_no_exclusions() -> None:
    assert running_daemon_gpu_pids(f"http://127.0.0.1:{free_port()}", None) == set()
    # Another machine's pids mean nothing here: it is not even asked.
    assert running_daemon_gpu_pids("http://192.0.2.1:8170", None, timeout_s=0.01) == set()
