"""A read-only state dir: an injected Xid and a confirmed reboot are refused up front
(issue 36). ``POST /api/v1/sim/xid`` answered 500, and ``reboot --confirm`` stopped the
engine before the simulated reboot failed on the unwritable dir.

Real fleetd, real engine process, a real read-only bind mount over the state dir (root).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until
from tests.support.read_only import make_read_only

pytestmark = pytest.mark.slow(seconds=5)


@pytest.fixture
def daemons() -> Iterator[list[Fleetd]]:
    started: list[Fleetd] = []
    yield started
    stop_all(started)


@pytest.fixture
def mounted() -> Iterator[list[Path]]:
    points: list[Path] = []
    yield points
    for point in reversed(points):
        subprocess.run(["umount", "-l", str(point)], check=False)


def _serving(daemon: Fleetd) -> dict[str, Any]:
    result: dict[str, Any] = daemon.get("/api/v1/status").json()["serving"]
    return result


def test_xid_and_reboot_are_refused_before_anything_moves(
    tmp_path: Path, daemons: list[Fleetd], mounted: list[Path]
) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text("[serving]\nprobe_interval_s = 0.3\n[canary]\nenabled = false\n")
    state = tmp_path / "state"
    daemon = start_fleetd(tmp_path, state, config=config)
    daemons.append(daemon)
    wait_until(lambda: _serving(daemon)["state"] == "ready", 30, "the engine ready")
    engine_pid = _serving(daemon)["pid"]
    make_read_only(state, mounted)

    xid = daemon.post("/api/v1/sim/xid", {"card": 1, "xid": 79})
    assert xid.status_code == 503, xid.text
    assert "cannot be written" in xid.json()["detail"]

    reboot = daemon.post("/api/v1/recovery/reboot", {"confirm": True})
    assert reboot.status_code != 500, reboot.text
    assert "the simulated host cannot reboot" in reboot.text
    assert "nothing was stopped" in reboot.text
    after = _serving(daemon)
    assert after["state"] == "ready" and after["pid"] == engine_pid, after
    assert "Traceback" not in daemon.log()
