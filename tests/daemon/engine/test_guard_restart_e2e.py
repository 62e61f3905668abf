"""fleetd restarts while the engine runs, with the guard configured (issue 36).

The way it failed: the guard's listening sockets were inheritable, the process-mode engine
inherited them and outlived fleetd, and the next fleetd could not bind ``[guard] listen``
("Address already in use", exit 2: systemd does not retry). Here a real fleetd with
``[guard]`` and the simulated engine is stopped by SIGTERM and started again: it is ready
within 15 s, adopts the same engine and the guard answers. And no descriptor of fleetd's
(sockets, the store, the lock) is open in the engine.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from serving.guard.keys import hash_key, new_key
from tests.support import loopback
from tests.support.fleetd import Fleetd, free_port, start_fleetd, stop_all, wait_until

pytestmark = pytest.mark.slow(seconds=5)


@pytest.fixture
def daemons() -> Iterator[list[Fleetd]]:
    started: list[Fleetd] = []
    yield started
    stop_all(started)  # engines included: they outlive fleetd by design


def _serving(daemon: Fleetd) -> dict[str, Any]:
    result: dict[str, Any] = daemon.get("/api/v1/status").json()["serving"]
    return result


def _descriptors(pid: int) -> dict[int, str]:
    found: dict[int, str] = {}
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            found[int(name)] = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:  # closed meanwhile
            continue
    return found


def test_sigterm_restart_with_the_guard_adopts_the_engine_and_serves(
    tmp_path: Path, daemons: list[Fleetd]
) -> None:
    key = new_key()
    guard_port = free_port()
    config = tmp_path / "fleet.toml"
    config.write_text(
        f"""
[serving]
probe_interval_s = 0.3
[canary]
enabled = false
[guard]
listen = "127.0.0.1:{guard_port}"
[[guard.keys]]
name = "laptop"
sha256 = "{hash_key(key)}"
""",
        encoding="utf-8",
    )
    state = tmp_path / "state"
    first = start_fleetd(tmp_path, state, config=config)
    daemons.append(first)
    wait_until(lambda: _serving(first)["state"] == "ready", 30, "the engine ready")
    wait_until(lambda: first.get("/api/v1/guard").json()["up"], 60, "the guard up")
    engine_pid = int(_serving(first)["pid"])

    # No descriptor of fleetd's in the engine: its targets beyond stdio are not fleetd's
    # (a socket or pipe by inode, a file by path; "anon_inode:[pidfd]" names no object).
    fleetd_targets = {
        t for t in _descriptors(first.proc.pid).values() if not t.startswith("anon_inode:")
    }
    engine = _descriptors(engine_pid)
    leaked = {fd: t for fd, t in engine.items() if fd > 2 and t in fleetd_targets}
    assert not leaked, f"descriptors of fleetd's open in the engine: {leaked}"
    assert not any(str(state) in target for fd, target in engine.items() if fd > 2), engine

    guard = f"http://127.0.0.1:{guard_port}"
    headers = {"Authorization": f"Bearer {key}"}
    assert loopback.get(f"{guard}/v1/models", headers=headers).status_code == 200

    assert first.stop(signal.SIGTERM) == 0
    # The defect failed fast (fleetd exited 2 on the guard's port): start_fleetd fails at
    # once on an exit, so its default deadline (for a loaded machine) costs nothing here.
    second = start_fleetd(tmp_path, state, config=config)
    daemons.append(second)
    wait_until(lambda: _serving(second)["state"] == "ready", 60, "the adopted engine ready")
    after = _serving(second)
    assert after["pid"] == engine_pid, "the engine was restarted instead of adopted"
    assert after["adopted"] is True
    wait_until(lambda: second.get("/api/v1/guard").json()["up"], 60, "the new guard up")
    answer = loopback.get(f"{guard}/v1/models", headers=headers)
    assert answer.status_code == 200, answer.text
    assert "Address already in use" not in second.log()
