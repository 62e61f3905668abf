"""The rig's drain through fleetd (issue 42): the API, fleetctl, every surface, a restart.

(And the status's ``engines`` list, which holds the one engine as ``serving``, and the NAME
of ``fleetctl start|stop|restart|logs``, which must name it.)

A real fleetd with ``[guard]`` on the simulated rig and engine: ``fleetctl drain`` makes
the guard's ``/health`` and new requests answer 503 ``draining``; the status, ``/metrics``
and ``fleetctl status`` show it; it survives a fleetd restart on the same state dir; the
POSTs need the token; ``fleetctl undrain`` ends it. A confirmed reboot (the simulated one
under ``--simulate``) drains first, records it, and its drain ends once the host booted.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import loopback
from tests.support.cli import run_fleetctl_here
from tests.support.fleetd import Fleetd, free_port, start_fleetd, stop_all, wait_until
from tests.support.waiting import DEADLINE_SCALE

pytestmark = pytest.mark.slow(seconds=15)


@pytest.fixture
def daemons() -> Iterator[list[Fleetd]]:
    started: list[Fleetd] = []
    yield started
    stop_all(started)  # engines included: they outlive fleetd by design


def _config(tmp: Path, guard_port: int) -> Path:
    config = tmp / "fleet.toml"
    config.write_text(
        f"""
[recovery]
drain_grace_s = 30
[canary]
enabled = false
[guard]
listen = "127.0.0.1:{guard_port}"
""",
        encoding="utf-8",
    )
    return config


def _fleetctl(daemon: Fleetd, *args: str) -> subprocess.CompletedProcess[str]:
    return run_fleetctl_here(
        "--url", daemon.url, *args, env={"CMPFLEET_STATE_DIR": str(daemon.state_dir)}
    )


def _drain(daemon: Fleetd) -> dict[str, Any]:
    result: dict[str, Any] = daemon.get("/api/v1/status").json()["drain"]
    return result


def _health(guard_port: int) -> int:
    # Stretched as every deadline is: at a load of 19 the guard's answer took over 10 s.
    health = loopback.get(f"http://127.0.0.1:{guard_port}/health", timeout=10 * DEADLINE_SCALE)
    return health.status_code


def _metric(daemon: Fleetd, name: str) -> float | None:
    for line in daemon.get("/metrics").text.splitlines():
        if line.split(" ")[0] == name:
            return float(line.rsplit(" ", 1)[1])
    return None


def _ready(daemon: Fleetd, guard_port: int) -> None:
    wait_until(
        lambda: daemon.get("/api/v1/status").json()["serving"]["state"] == "ready",
        60,
        "the engine ready",
    )
    wait_until(lambda: _health(guard_port) == 200, 30, "the guard's /health 200")


def test_drain_shows_everywhere_survives_a_restart_and_undrain_ends_it(
    tmp_path: Path, daemons: list[Fleetd]
) -> None:
    guard_port = free_port()
    config = _config(tmp_path, guard_port)
    state = tmp_path / "state"
    daemon = start_fleetd(tmp_path, state, config=config)
    daemons.append(daemon)
    _ready(daemon, guard_port)
    assert _drain(daemon)["draining"] is False
    # ``engines`` lists the one engine, as ``serving``; its log line only with the token.
    public = daemon.get("/api/v1/status").json()
    assert [engine["profile"] for engine in public["engines"]] == [public["serving"]["profile"]]
    assert public["engines"][0]["cards"] == public["serving"]["cards"]
    assert "last_log_line" not in public["engines"][0]
    private = loopback.get(
        f"{daemon.url}/api/v1/status", headers={"Authorization": f"Bearer {daemon.token}"}
    ).json()
    assert private["serving"].get("last_log_line"), "no log line: the check above proved nothing"
    assert private["engines"][0]["last_log_line"] == private["serving"]["last_log_line"]
    # NAME picks the engine by its profile: the one in force acts, any other is refused.
    logs = _fleetctl(daemon, "logs", "default", "--lines", "3")
    assert logs.returncode == 0, logs.stderr
    other = _fleetctl(daemon, "stop", "qwen")
    assert other.returncode == 2
    assert other.stderr.strip() == (
        "fleetctl: no engine 'qwen' on this rig (engines: default); "
        "`fleetctl serve qwen` makes it the rig's engine"
    )
    assert daemon.get("/api/v1/status").json()["serving"]["state"] == "ready"
    assert _metric(daemon, "cmpfleet_drain_active") == 0

    assert daemon.post("/api/v1/drain", {"grace_s": 5}, token=None).status_code in (401, 403)
    assert daemon.post("/api/v1/drain", {"grace_s": -1}).status_code == 422

    drained = _fleetctl(daemon, "drain", "--grace-s", "45", "--reason", "new risers")
    assert drained.returncode == 0, drained.stderr
    assert "draining since" in drained.stdout and "new risers" in drained.stdout
    wait_until(lambda: _health(guard_port) == 503, 15, "the guard's /health 503")
    body = loopback.get(f"http://127.0.0.1:{guard_port}/health").json()
    assert body["error"]["code"] == "draining"
    drain = _drain(daemon)
    assert drain["draining"] is True and drain["grace_s"] == 45
    assert drain["reason"] == "new risers" and drain["until_reboot"] is False
    wait_until(lambda: _drain(daemon)["quiet"] is True, 15, "the drain quiet")
    assert _metric(daemon, "cmpfleet_drain_active") == 1
    status = _fleetctl(daemon, "status")
    assert "DRAINING" in status.stdout, status.stdout

    # A restart on the same state dir: still drained, and the new guard is told at once.
    assert daemon.stop() == 0
    daemon = start_fleetd(tmp_path, state, config=config)
    daemons.append(daemon)
    assert _drain(daemon)["draining"] is True
    # Its first answer already: the new guard process is started draining, not told later.
    assert _health(guard_port) == 503

    undrained = _fleetctl(daemon, "undrain", "--json")
    assert undrained.returncode == 0, undrained.stderr
    assert '"draining": false' in undrained.stdout
    wait_until(lambda: _health(guard_port) == 200, 30, "the guard serves again")
    assert _metric(daemon, "cmpfleet_drain_active") == 0


def test_a_confirmed_reboot_drains_first_and_its_drain_ends_after_the_boot(
    tmp_path: Path, daemons: list[Fleetd]
) -> None:
    guard_port = free_port()
    daemon = start_fleetd(tmp_path, tmp_path / "state", config=_config(tmp_path, guard_port))
    daemons.append(daemon)
    _ready(daemon, guard_port)
    boot = daemon.get("/api/v1/status").json()["rig"]["boot_id"]
    plan = daemon.get("/api/v1/recovery/reboot").json()["message"]
    assert "drains the rig" in plan and "up to 30 s" in plan, plan

    answer = loopback.post(
        f"{daemon.url}/api/v1/recovery/reboot",
        json={"confirm": True},
        headers={"Authorization": f"Bearer {daemon.token}"},
        timeout=120,
    )
    assert answer.status_code == 200, answer.text
    events = daemon.get("/api/v1/events?limit=50").json()
    messages = [event["message"] for event in events]
    assert any("drain begun by api" in message for message in messages), messages
    wait_until(
        lambda: daemon.get("/api/v1/status").json()["rig"]["boot_id"] != boot,
        30,
        "the simulated boot seen",
    )
    wait_until(lambda: _drain(daemon)["draining"] is False, 15, "the reboot's drain over")
    _ready(daemon, guard_port)  # the rig comes back to its balancer once its engine is up
