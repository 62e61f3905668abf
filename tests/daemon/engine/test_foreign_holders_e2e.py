"""Foreign holders on a real simulated 8-card fleetd: a profile's cards or port held by
something not ours refuse its start and name the holder; other cards only warn;
``--stop-foreign`` stops a foreign container with SIGINT, then SIGTERM (in the simulation:
never the host's docker) on record, and one that ignores both is refused, never killed; a
bare process is named and never signalled."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from daemon.store import Store
from tests.support.cli import run_fleetctl_here
from tests.support.fleetd import Fleetd, latch_by_xid, start_fleetd, stop_all, wait_until

SCENARIOS = Path(__file__).resolve().parents[3] / "hwcheck" / "sim" / "scenarios"
HOLDERS = """
foreign_processes = [
    {pid = 4242, name = "python3", device = "/dev/nvidiactl", cmdline = "python3 train.py --api-key hunter2", container = "trainer", image = "pytorch/pytorch:2.6"},
    {pid = 4242, name = "python3", device = "/dev/nvidia2", cmdline = "python3 train.py --api-key hunter2", container = "trainer", image = "pytorch/pytorch:2.6"},
    {pid = 5151, name = "python3", device = "/dev/nvidia7", cmdline = "python3 bench.py"},
    {pid = 6161, name = "vllm", device = "/dev/nvidia6", cmdline = "vllm serve glm", container = "stubborn", image = "vllm/vllm-openai:glm", ignores_signals = true},
]
"""
CONFIG = """
[serving]
profile = "six"
probe_interval_s = 0.3
stop_timeout_s = 5

[serving.profiles.six]
preset = "sim-engine"
gpus = "0,1,2,3,4,5"

[serving.profiles.seven]
preset = "sim-engine"
gpus = "0,1,2,3,4,5,6"

[serving.profiles.eight]
preset = "sim-engine"

[serving.profiles.fixed]
preset = "sim-engine"
port = {port}
"""


@dataclass
class Rig:
    daemon: Fleetd
    listener: socket.socket

    def fleetctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {"CMPFLEET_STATE_DIR": str(self.daemon.state_dir)}
        return run_fleetctl_here("--url", self.daemon.url, *args, env=env)

    def serving(self) -> dict[str, Any]:
        document: dict[str, Any] = self.daemon.get("/api/v1/status").json()["serving"]
        return document


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    tmp = tmp_path_factory.mktemp("foreign")
    scenario = tmp / "held.toml"
    scenario.write_text(
        (SCENARIOS / "healthy-8.toml").read_text().replace("[host]", "[host]" + HOLDERS)
    )
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    config = tmp / "fleet.toml"
    config.write_text(CONFIG.format(port=listener.getsockname()[1]))
    daemon = start_fleetd(tmp, tmp / "state", simulate=str(scenario), config=config)
    try:
        yield Rig(daemon, listener)
    finally:
        stop_all([daemon])
        listener.close()


def test_a_container_on_the_profiles_cards_refuses_the_start_and_is_named(rig: Rig) -> None:
    # The autostart was refused the same way: nothing runs, and the engine line says why
    # until the next start (not a bare "stopped").
    serving = rig.serving()
    assert serving["state"] == "stopped"
    assert serving["refusal"]["trigger"] == "autostart"
    assert "container trainer" in serving["refusal"]["message"] and serving["refusal"]["codes"]
    result = rig.fleetctl("start")
    assert result.returncode == 4, result.stdout + result.stderr
    assert "container trainer (image pytorch/pytorch:2.6, docker) holds card 2" in result.stderr
    assert "--stop-foreign" in result.stderr
    assert "card 7" not in result.stderr  # not this profile's card: no refusal
    assert "hunter2" not in result.stderr


def test_under_the_latch_stop_foreign_stops_nothing(rig: Rig) -> None:
    """The start gate refuses first: nobody's container is stopped for a start that cannot be."""
    latch_by_xid(rig.daemon)
    result = rig.fleetctl("start", "--stop-foreign")
    assert result.returncode == 4, result.stdout + result.stderr
    assert "reboot required" in result.stderr
    assert "stopped foreign container" not in result.stderr
    events = rig.daemon.get("/api/v1/events?kind=operator&limit=20").json()
    assert not [e for e in events if "foreign container" in e["message"]]
    cleared = rig.fleetctl("clear-reboot-latch", "--reason", "simulated Xid, no fault")
    assert cleared.returncode == 0, cleared.stdout + cleared.stderr


def test_stop_foreign_stops_the_container_on_record_then_starts(rig: Rig) -> None:
    result = rig.fleetctl("start", "--stop-foreign")
    assert result.returncode == 0, result.stderr
    assert (
        "fleetctl: stopped foreign container trainer (image pytorch/pytorch:2.6): "
        "docker kill --signal SIGINT trainer\n"
    ) in result.stderr  # its graceful signal took: no SIGTERM, never stop --time (SIGKILL)
    # The bare process on card 7 is another profile's business: a warning, not a refusal.
    assert "pid 5151 (python3 bench.py) holds card 7" in result.stderr
    wait_until(lambda: rig.serving()["state"] == "ready", 30, "the engine ready")
    events = rig.daemon.get("/api/v1/events?kind=operator&limit=20").json()
    (stopped,) = [e for e in events if "foreign container" in e["message"]]
    assert stopped["message"].startswith("stopped foreign container trainer")
    assert "simulated" in stopped["message"]  # never the host's docker
    store = Store.open(f"sqlite:///{rig.daemon.state_dir / 'fleet.db'}")
    try:
        rows = [row for row in store.list_audit(limit=50) if row.action == "stop_foreign"]
    finally:
        store.close()
    assert [(row.target, row.outcome) for row in rows] == [("trainer", "done")]


def test_a_bare_process_on_the_profiles_cards_is_named_and_never_signalled(rig: Rig) -> None:
    """Refused before anything stopped (issue 33): the engine of "six" keeps serving."""
    pid = rig.serving()["pid"]
    result = rig.fleetctl("serve", "eight", "--stop-foreign")
    assert result.returncode == 4, result.stdout + result.stderr
    assert "pid 5151 (python3 bench.py) holds card 7" in result.stderr
    assert "fleetd never signals a process it did not start" in result.stderr
    status = rig.daemon.get("/api/v1/status").json()
    (check,) = [c for c in status["checks"] if c["id"] == "foreign_gpu_processes"]
    assert "pid 5151 python3" in check["message"]  # still there: nothing killed it
    serving = status["serving"]
    assert (serving["profile"], serving["state"], serving["pid"]) == ("six", "ready", pid)
    assert serving.get("switch") is None  # no switch was begun


def test_a_container_that_ignores_both_signals_is_refused_never_killed(rig: Rig) -> None:
    """The foreign holders are stopped before the engine is (issue 33): the container on card
    6 ignores SIGINT and SIGTERM, so the switch to "seven" ends there, named, never killed
    (issue 27), and the engine of "six" keeps serving."""
    pid = rig.serving()["pid"]
    result = rig.fleetctl("serve", "seven", "--stop-foreign")
    assert result.returncode != 0, result.stdout + result.stderr
    assert (
        "foreign container not stopped: container stubborn (image vllm/vllm-openai:glm, "
        "docker) was sent SIGINT then SIGTERM: still running after SIGINT then SIGTERM"
    ) in result.stdout + result.stderr
    events = rig.daemon.get("/api/v1/events?kind=operator&limit=20").json()
    (refused,) = [e for e in events if "could not stop foreign container stubborn" in e["message"]]
    assert (
        "docker kill --signal SIGINT stubborn; docker kill --signal SIGTERM stubborn"
        in refused["message"]
    )
    status = rig.daemon.get("/api/v1/status").json()
    (check,) = [c for c in status["checks"] if c["id"] == "foreign_gpu_processes"]
    assert "pid 6161 vllm" in check["message"]  # still there: nothing killed it
    serving = status["serving"]
    assert (serving["profile"], serving["state"], serving["pid"]) == ("six", "ready", pid)


def test_the_port_holder_is_named(rig: Rig) -> None:
    result = rig.fleetctl("--json", "serve", "fixed")
    assert result.returncode == 4
    error = json.loads(result.stdout)["error"]
    port = rig.listener.getsockname()[1]
    assert f"port {port} on 127.0.0.1 is taken: pid {os.getpid()} (" in error
    assert f"holds port {port}" in error
